/*
 * ktcp-version.h — the version every ktcp binary prints for --version: the
 * VERSION file plus `git describe --always --dirty` when built from a git
 * checkout. Defined in a file the build generates (build/gen/version.c).
 */
#ifndef KTCP_VERSION_H
#define KTCP_VERSION_H

extern const char ktcp_version[];

/* Prints "<prog> <version>" on stdout, as --version does everywhere. */
void ktcp_print_version(const char *prog);

#endif /* KTCP_VERSION_H */
