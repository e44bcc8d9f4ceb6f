// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * gzip.c — gzip of a whole file with the kernel's zlib, done once per file
 * version and kept in the cache (never per request). The input goes to
 * zlib_deflate in slices of HTTP_SERVER_GZIP_SLICE with cond_resched
 * between them, so a 4 MiB build never holds a CPU for long.
 *
 * The kernel's zlib_deflateInit2 knows raw deflate (negative windowBits)
 * and the zlib wrapper, not the gzip one (windowBits 16 + 15), so the
 * RFC 1952 header and trailer (CRC-32, ISIZE) are written here around a
 * raw deflate stream.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include "ktcp_compat_unaligned.h"
#include <linux/crc32.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/zlib.h>

#include "khttpd.h"

#define GZIP_HEADER_LEN 10
#define GZIP_TRAILER_LEN 8

static const u8 khttpd_gzip_header[GZIP_HEADER_LEN] = {
	0x1f, 0x8b, /* magic */
	8, /* CM = deflate */
	0, /* FLG: no name, no comment, no extra */
	0,    0,    0, 0, /* MTIME: none */
	0, /* XFL */
	3, /* OS = Unix, as zlib writes it */
};

static struct http_gz *khttpd_gz_worthless(void)
{
	struct http_gz *gz = kvzalloc(sizeof(*gz), GFP_KERNEL);

	if (gz)
		gz->worthless = true;
	return gz;
}

/* Deflate in[0..len) into zs's output, slice by slice: Z_STREAM_END, or
 * Z_BUF_ERROR when the output ran out (not smaller), or another error.
 */
static int khttpd_deflate_sliced(struct z_stream_s *zs, const char *in,
				 size_t len, const bool *stop)
{
	size_t off = 0;

	for (;;) {
		size_t n = min_t(size_t, len - off, HTTP_SERVER_GZIP_SLICE);
		bool last = off + n == len;
		int ret;

		zs->next_in = (const u8 *)in + off;
		zs->avail_in = n;
		ret = zlib_deflate(zs, last ? Z_FINISH : Z_NO_FLUSH);
		if (last)
			return ret == Z_STREAM_END ? ret : Z_BUF_ERROR;
		if (ret != Z_OK)
			return ret;
		if (zs->avail_in)
			return Z_BUF_ERROR; /* the output is full */
		off += n;
		cond_resched();
		if (stop && READ_ONCE(*stop))
			return Z_STREAM_ERROR;
	}
}

struct http_gz *khttpd_gzip(const char *in, size_t len, const bool *stop)
{
	struct z_stream_s zs = {};
	struct http_gz *gz, *out = NULL;
	size_t cap, total;
	u8 *tail;
	u32 crc;
	int ret;

	/* Worth it only if the whole stream ends up smaller than the input. */
	if (len <= GZIP_HEADER_LEN + GZIP_TRAILER_LEN + 1)
		return khttpd_gz_worthless();
	cap = len - 1;

	zs.workspace =
		kvzalloc(zlib_deflate_workspacesize(-MAX_WBITS, MAX_MEM_LEVEL),
			 GFP_KERNEL);
	if (!zs.workspace)
		return NULL;
	gz = kvmalloc(sizeof(*gz) + cap, GFP_KERNEL);
	if (!gz)
		goto out_ws;
	memset(gz, 0, sizeof(*gz));

	/* checkpatch: CAMELCASE: the kernel's zlib API names */
	if (zlib_deflateInit2(&zs, HTTP_SERVER_GZIP_LEVEL, Z_DEFLATED,
			      -MAX_WBITS, MAX_MEM_LEVEL,
			      Z_DEFAULT_STRATEGY) != Z_OK)
		goto out_gz;
	memcpy(gz->data, khttpd_gzip_header, GZIP_HEADER_LEN);
	zs.next_out = (u8 *)gz->data + GZIP_HEADER_LEN;
	zs.avail_out = cap - GZIP_HEADER_LEN - GZIP_TRAILER_LEN;
	ret = khttpd_deflate_sliced(&zs, in, len, stop);
	total = GZIP_HEADER_LEN + zs.total_out + GZIP_TRAILER_LEN;
	zlib_deflateEnd(&zs); /* checkpatch: CAMELCASE: kernel zlib API */
	if (ret != Z_STREAM_END) {
		/* Out of room means "not smaller": remember that, keep nothing. */
		if (ret == Z_BUF_ERROR)
			out = khttpd_gz_worthless();
		goto out_gz;
	}

	crc = crc32_le(~0U, (const u8 *)in, len) ^ ~0U;
	tail = (u8 *)gz->data + GZIP_HEADER_LEN + zs.total_out;
	put_unaligned_le32(crc, tail);
	put_unaligned_le32((u32)len, tail + 4); /* ISIZE: len mod 2^32 */
	gz->len = total;

	/* Keep only what the stream needs. */
	out = kvmalloc(sizeof(*gz) + total, GFP_KERNEL);
	if (out) {
		memcpy(out, gz, sizeof(*gz) + total);
	} else {
		out = gz;
		gz = NULL;
	}
out_gz:
	kvfree(gz);
out_ws:
	kvfree(zs.workspace);
	return out;
}
