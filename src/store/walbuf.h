/*
 * walbuf.h: a SQLite VFS that writes a transaction's WAL frames with one
 * write instead of two per page (walbuf.c says why and how).
 */
#ifndef ARB_STORE_WALBUF_H
#define ARB_STORE_WALBUF_H

/* The VFS's name, for sqlite3_open_v2, registered on first use over the
 * process's default VFS; NULL when it cannot be (out of memory): open with
 * the default VFS then. Thread-safe. */
const char *store_walbuf_vfs(void);

#endif
