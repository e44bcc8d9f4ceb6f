"""The document root every HTTP engine serves, built once per session.

    <base>/outside/secret.txt     a file outside the root
    <base>/root/                  the served root:
        a.txt                     "hello\\n"
        empty.txt                 0 bytes
        bytes.bin                 the 256 byte values, 4 times
        mib.bin                   1 MiB of seeded random bytes
        large.bin                 8 MiB pattern (in-flight at SIGTERM)
        text.txt                  64 KiB of compressible text
        page.html, style.css, data.json, image.png
        p0.txt .. p9.txt          small distinct files for pipelining
        ten.bin                   10 KiB, pipelined deep to a slow reader
        mutable.txt               rewritten by the cache test
        idx/index.html            a directory with an index
        sub/inner.txt             a directory without one
        names/                    names with <>&"', spaces, %, UTF-8
        many/                     10,000 entries
        link-in -> a.txt          symlink staying inside
        link-out -> ../outside/secret.txt
        linkdir-out -> ../outside
        .env, .git/config, sub/.hidden   dotfiles (404 unless allowed)
        .well-known/security.txt         served always
        perm/public.txt           0644: served to the server's user
        perm/private.txt          0600, the test's user's (root): 403
        perm/closed/inner.txt     in a 0700 directory: 403, and so is it
        perm/later.txt            served, then closed (0600) by a test
        perm/search/index.html    in a 0711 directory (entered, not read):
        perm/search/file.txt        both served; perm/search/bare/ (0711,
                                    no index) cannot be listed: 403
        sorted/                   names whose byte order differs from a
                                  case-folded one, known sizes and mtimes
        long/<8 x 250 '&'>/x.txt  a listing whose title exceeds a piece
        crowded/                  more names than a listing holds
"""
import os
import random

SECRET = b"TOP-SECRET outside the root\n"
SPECIAL_NAMES = ['<b>&"\'.txt', "with space.txt", "caf\u00e9-\u65e5\u672c.txt",
                 "100%.txt", "q?x#y.txt"]
MANY = 10000
# sorted/: name -> (bytes, mtime); byte order: "10.txt" < "9.txt" < "B.txt"
# < "Z/" < "_x.txt" < "a.txt" < "caf\u00e9.txt"
SORTED = {"a.txt": (b"a" * 3, 1_000_000_000), "B.txt": (b"b" * 1500, 1_100_000_000),
          "10.txt": (b"", 1_200_000_000), "9.txt": (b"n" * 9, 1_300_000_000),
          "_x.txt": (b"x" * 70000, 1_400_000_000), "caf\u00e9.txt": (b"c", 1_500_000_000)}
SORTED_DIRS = {"Z": 1_600_000_000}
LONG_SEGMENT = "&" * 250
LONG_DIR = "long/" + "/".join([LONG_SEGMENT] * 8)
# the listing bound (HTTP_SERVER_LISTING_MAX_ENTRIES) and one more
LISTING_MAX_ENTRIES = 20000
CROWDED = LISTING_MAX_ENTRIES + 1


class Docroot:
    def __init__(self, base):
        self.base = base
        self.root = os.path.join(base, "root")
        self.outside = os.path.join(base, "outside")
        self.files = {}

    def put(self, rel, data):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        self.files[rel] = data
        return path

    def read(self, rel):
        with open(os.path.join(self.root, rel), "rb") as f:
            return f.read()


def build_docroot(base):
    d = Docroot(base)
    os.makedirs(d.root)
    os.makedirs(d.outside)
    with open(os.path.join(d.outside, "secret.txt"), "wb") as f:
        f.write(SECRET)

    rng = random.Random(20240611)
    d.put("a.txt", b"hello\n")
    d.put("empty.txt", b"")
    d.put("bytes.bin", bytes(range(256)) * 4)
    d.put("mib.bin", rng.randbytes(1 << 20))
    d.put("large.bin", bytes(i * 7 % 251 for i in range(1 << 16)) * 128)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta"]
    lines = []
    n = 0
    while n < 65536:
        line = b" ".join(rng.choice(words) for _ in range(12)) + b"\n"
        lines.append(line)
        n += len(line)
    d.put("text.txt", b"".join(lines)[:65536])
    d.put("page.html", b"<!DOCTYPE html><title>p</title><p>page</p>\n" * 20)
    d.put("style.css", b"body { color: black; }\n" * 50)
    d.put("data.json", b'{"k": [1, 2, 3]}\n')
    d.put("image.png", b"\x89PNG\r\n\x1a\n" + bytes(range(200)))
    for i in range(10):
        d.put(f"p{i}.txt", f"pipelined file {i}\n".encode() * (i + 1))
    d.put("ten.bin", rng.randbytes(10 * 1024))
    d.put("mutable.txt", b"version 0\n")
    d.put("idx/index.html", b"<h1>index of idx</h1>\n")
    d.put("sub/inner.txt", b"inner\n")
    for name in SPECIAL_NAMES:
        d.put("names/" + name, name.encode() + b"\n")
    many = os.path.join(d.root, "many")
    os.makedirs(many)
    for i in range(MANY):
        os.mknod(os.path.join(many, f"entry-{i:05d}.txt"))  # one syscall each
    os.symlink("a.txt", os.path.join(d.root, "link-in"))
    os.symlink("../outside/secret.txt", os.path.join(d.root, "link-out"))
    os.symlink("../outside", os.path.join(d.root, "linkdir-out"))

    d.put(".env", b"SECRET_KEY=dotenv\n")
    d.put(".git/config", b"[core]\n\tbare = false\n")
    d.put("sub/.hidden", b"hidden\n")
    d.put(".well-known/security.txt", b"Contact: mailto:security@example.org\n")
    # permissions: the files belong to the test's user (root when the
    # permission tests run); the server reads them as nobody
    d.put("perm/public.txt", b"public\n")
    d.put("perm/later.txt", b"later\n")  # closed by a test once cached
    os.chmod(d.put("perm/private.txt", b"private\n"), 0o600)
    d.put("perm/closed/inner.txt", b"closed\n")
    os.chmod(os.path.join(d.root, "perm/closed"), 0o700)
    d.put("perm/search/index.html", b"searchable index\n")
    d.put("perm/search/file.txt", b"searchable file\n")
    d.put("perm/search/bare/inner.txt", b"bare inner\n")
    os.chmod(os.path.join(d.root, "perm/search/bare"), 0o711)
    os.chmod(os.path.join(d.root, "perm/search"), 0o711)
    for name, (data, mtime) in SORTED.items():
        os.utime(d.put("sorted/" + name, data), (mtime, mtime))
    for name, mtime in SORTED_DIRS.items():
        os.makedirs(os.path.join(d.root, "sorted", name))
        os.utime(os.path.join(d.root, "sorted", name), (mtime, mtime))
    d.put(LONG_DIR + "/x.txt", b"deep\n")
    crowded = os.path.join(d.root, "crowded")
    os.makedirs(crowded)
    for i in range(CROWDED):
        os.mknod(os.path.join(crowded, f"c{i:05d}"))
    return d
