/*
 * walbuf.c: a SQLite VFS over the process's default one (unix) that
 * gathers the frames a transaction appends to the WAL and writes them with
 * one pwrite, just before the sync that makes the commit durable.
 *
 * Why: SQLite writes each WAL frame as two pwrites, its 24-byte header and
 * then its page, so a commit of 14 pages costs 29 system calls (with the
 * marker's), each of which takes the inode's lock and dirties its times.
 * The controller's commit thread spent a third of its time there (issue
 * 20). The bytes, their offsets and their order in the file are the same;
 * only the number of calls changes.
 *
 * Durability: the buffer is written before every call on the file other
 * than a write (sync, read, truncate, size, lock, close, file control, shm),
 * so nothing reads the file without what was written to it, and a commit is
 * durable exactly when SQLite's sync of it returns, as before. This holds
 * only where SQLite syncs the WAL at each commit: synchronous=FULL. With
 * NORMAL a committed transaction would stay in this process's memory until
 * the next one, and a kill -9 would lose it; store_sqlite.c opens with the
 * default VFS then. A write the buffer holds that fails when it is written
 * fails the call that wrote it (the commit's sync): the commit fails.
 *
 * Only files SQLite opens as a WAL are buffered; the database file (the
 * checkpoint's writes, scattered) and journals pass straight through.
 * A write that does not follow the buffered bytes (a rolled-back
 * transaction's frames written over, a new WAL's header) first writes what
 * is buffered: the file gets the same bytes in the same order.
 *
 * A WAL that grows is grown ahead, in zeros (WB_GROW at a time, written
 * after the frames that reach past its end, before their sync). Why: on
 * ext4 a sync of a file whose size or blocks changed also writes its inode
 * and the allocation's bitmaps, each a synchronous 4 KiB write of its own:
 * three device requests a commit where one is the frames (counted with
 * block:block_rq_issue over a replay of a bench's commits), for every
 * commit until the WAL first wraps, some 32 MiB after each start. Grown
 * ahead, a commit writes into blocks the file already has. SQLite reads a
 * WAL only up to its first frame that is not valid (zeros are not), and
 * restarts it from the top after a checkpoint without truncating it, as it
 * did with the old frames left there. A growth that fails (a full disk) is
 * left off: only the frames' own write can fail a commit.
 *
 * The VFS is registered once per process (SQLite's VFS list is the
 * process's), never as the default.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/walbuf.h"

#define WB_NAME "arb-walbuf"
/* The unix VFS writes at most 128 KiB - 1 per call (its pwrite masks the
 * count to 17 bits): a larger transaction goes out in pieces of this. */
#define WB_MAX ((size_t)124 << 10)
#define WB_ROUND8(n) (((n) + 7) & ~(size_t)7)
/* How far ahead a growing WAL is grown (see the top): 4 MiB, a thousand
 * pages, one growth per hundred-odd commits of a busy controller. */
#define WB_GROW ((sqlite3_int64)4 << 20)

typedef struct wb_file {
    sqlite3_file base;  /* pMethods: wb_io */
    sqlite3_file *real; /* the parent VFS's file, right after this struct */
    char *buf;          /* bytes written to the WAL, not yet to the file */
    size_t n, cap;
    sqlite3_int64 at;   /* the file offset of buf[0] */
    sqlite3_int64 size; /* the file's size, as far as this file knows (-1: ask) */
    bool wal, nogrow;   /* nogrow: a growth failed; none is tried again */
} wb_file_t;

static sqlite3_vfs wb_vfs;
static pthread_once_t wb_once = PTHREAD_ONCE_INIT;
static bool wb_ok;

#define PARENT ((sqlite3_vfs *)wb_vfs.pAppData)
#define REAL(f) (((wb_file_t *)(f))->real)
#define RM(f) (REAL(f)->pMethods)

/* The file grown with zeros from its end to a multiple of WB_GROW past
 * end (see the top). Best effort: a failure (a full disk) cuts the file
 * back to where it ended, giving the room back, and stops the growing. */
static void wb_grow(wb_file_t *f, sqlite3_int64 end)
{
    static const char zeros[16384];
    sqlite3_int64 to = (end / WB_GROW + 1) * WB_GROW, was;

    if (f->size < 0 && f->real->pMethods->xFileSize(f->real, &f->size) != SQLITE_OK) {
        f->nogrow = true;
        return;
    }
    was = f->size;
    while (f->size < to) {
        sqlite3_int64 k =
            to - f->size < (sqlite3_int64)sizeof zeros ? to - f->size : (sqlite3_int64)sizeof zeros;
        if (f->real->pMethods->xWrite(f->real, zeros, (int)k, f->size) != SQLITE_OK) {
            f->real->pMethods->xTruncate(f->real, was);
            f->nogrow = true;
            f->size = -1;
            return;
        }
        f->size += k;
    }
}

/* Write what is buffered; the buffer is empty after, whatever the result. */
static int wb_flush(wb_file_t *f)
{
    int rc;
    sqlite3_int64 end = f->at + (sqlite3_int64)f->n;

    if (f->n == 0)
        return SQLITE_OK;
    rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->n, f->at);
    f->n = 0;
    if (rc == SQLITE_OK && f->size >= 0 && end > f->size)
        f->size = end;
    if (rc == SQLITE_OK && !f->nogrow && (f->size < 0 || end > f->size - WB_GROW / 4))
        wb_grow(f, end);
    return rc;
}

static int wb_close(sqlite3_file *file)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f), rc2 = RM(f)->xClose(f->real);

    free(f->buf);
    f->buf = NULL;
    f->cap = 0;
    return rc != SQLITE_OK ? rc : rc2;
}

static int wb_read(sqlite3_file *file, void *p, int amt, sqlite3_int64 off)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xRead(REAL(file), p, amt, off);
}

static int wb_write(sqlite3_file *file, const void *p, int amt, sqlite3_int64 off)
{
    wb_file_t *f = (wb_file_t *)file;
    size_t len = (size_t)amt;
    int rc;

    if (!f->wal || amt <= 0)
        return RM(f)->xWrite(f->real, p, amt, off);
    if (f->n && (off != f->at + (sqlite3_int64)f->n || f->n + len > WB_MAX) &&
        (rc = wb_flush(f)) != SQLITE_OK)
        return rc;
    if (len > WB_MAX) {
        f->size = -1; /* past what this file knows, perhaps */
        return RM(f)->xWrite(f->real, p, amt, off);
    }
    if (f->n + len > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap < f->n + len)
            cap *= 2;
        char *nb = realloc(f->buf, cap);
        if (!nb) { /* no room to gather: write it as SQLite asked */
            if ((rc = wb_flush(f)) != SQLITE_OK)
                return rc;
            f->size = -1;
            return RM(f)->xWrite(f->real, p, amt, off);
        }
        f->buf = nb;
        f->cap = cap;
    }
    if (f->n == 0)
        f->at = off;
    memcpy(f->buf + f->n, p, len);
    f->n += len;
    return SQLITE_OK;
}

static int wb_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc = wb_flush(f);

    f->size = -1; /* asked again at the next growth */
    return rc != SQLITE_OK ? rc : RM(file)->xTruncate(REAL(file), size);
}

static int wb_sync(sqlite3_file *file, int flags)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xSync(REAL(file), flags);
}

static int wb_size(sqlite3_file *file, sqlite3_int64 *size)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xFileSize(REAL(file), size);
}

static int wb_lock(sqlite3_file *file, int lock)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xLock(REAL(file), lock);
}

static int wb_unlock(sqlite3_file *file, int lock)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xUnlock(REAL(file), lock);
}

static int wb_reserved(sqlite3_file *file, int *out)
{
    return RM(file)->xCheckReservedLock(REAL(file), out);
}

static int wb_control(sqlite3_file *file, int op, void *arg)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xFileControl(REAL(file), op, arg);
}

static int wb_sector(sqlite3_file *file)
{
    return RM(file)->xSectorSize(REAL(file));
}

static int wb_device(sqlite3_file *file)
{
    return RM(file)->xDeviceCharacteristics(REAL(file));
}

static int wb_shm_map(sqlite3_file *file, int pg, int pgsz, int extend, void volatile **pp)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xShmMap(REAL(file), pg, pgsz, extend, pp);
}

static int wb_shm_lock(sqlite3_file *file, int ofs, int n, int flags)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xShmLock(REAL(file), ofs, n, flags);
}

static void wb_shm_barrier(sqlite3_file *file)
{
    RM(file)->xShmBarrier(REAL(file));
}

static int wb_shm_unmap(sqlite3_file *file, int del)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xShmUnmap(REAL(file), del);
}

static int wb_fetch(sqlite3_file *file, sqlite3_int64 off, int amt, void **pp)
{
    int rc = wb_flush((wb_file_t *)file);
    return rc != SQLITE_OK ? rc : RM(file)->xFetch(REAL(file), off, amt, pp);
}

static int wb_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
    return RM(file)->xUnfetch(REAL(file), off, p);
}

/* Version 3, as the unix VFS's files are (wb_open refuses an older one). */
static const sqlite3_io_methods wb_io = {
    .iVersion = 3,
    .xClose = wb_close,
    .xRead = wb_read,
    .xWrite = wb_write,
    .xTruncate = wb_truncate,
    .xSync = wb_sync,
    .xFileSize = wb_size,
    .xLock = wb_lock,
    .xUnlock = wb_unlock,
    .xCheckReservedLock = wb_reserved,
    .xFileControl = wb_control,
    .xSectorSize = wb_sector,
    .xDeviceCharacteristics = wb_device,
    .xShmMap = wb_shm_map,
    .xShmLock = wb_shm_lock,
    .xShmBarrier = wb_shm_barrier,
    .xShmUnmap = wb_shm_unmap,
    .xFetch = wb_fetch,
    .xUnfetch = wb_unfetch,
};

static int wb_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *oflags)
{
    wb_file_t *f = (wb_file_t *)file;
    int rc;

    (void)vfs;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)((char *)f + WB_ROUND8(sizeof *f));
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    f->size = -1;
    rc = PARENT->xOpen(PARENT, name, f->real, flags, oflags);
    if (rc != SQLITE_OK || !f->real->pMethods) {
        f->base.pMethods = NULL; /* SQLite calls no xClose on it */
        return rc;
    }
    if (f->real->pMethods->iVersion < 3) { /* wb_io forwards version 3's calls */
        f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    f->base.pMethods = &wb_io;
    return SQLITE_OK;
}

/* The rest of the VFS is the parent's, called with the parent. */
static int wb_delete(sqlite3_vfs *v, const char *name, int dsync)
{
    (void)v;
    return PARENT->xDelete(PARENT, name, dsync);
}

static int wb_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return PARENT->xAccess(PARENT, name, flags, out);
}

static int wb_fullpath(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return PARENT->xFullPathname(PARENT, name, n, out);
}

static void *wb_dlopen(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return PARENT->xDlOpen(PARENT, name);
}

static void wb_dlerror(sqlite3_vfs *v, int n, char *msg)
{
    (void)v;
    PARENT->xDlError(PARENT, n, msg);
}

static void (*wb_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return PARENT->xDlSym(PARENT, h, sym);
}

static void wb_dlclose(sqlite3_vfs *v, void *h)
{
    (void)v;
    PARENT->xDlClose(PARENT, h);
}

static int wb_random(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return PARENT->xRandomness(PARENT, n, out);
}

static int wb_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return PARENT->xSleep(PARENT, us);
}

static int wb_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return PARENT->xCurrentTime(PARENT, out);
}

static int wb_lasterr(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return PARENT->xGetLastError ? PARENT->xGetLastError(PARENT, n, out) : 0;
}

static int wb_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    if (PARENT->iVersion >= 2 && PARENT->xCurrentTimeInt64)
        return PARENT->xCurrentTimeInt64(PARENT, out);
    double d = 0;
    int rc = PARENT->xCurrentTime(PARENT, &d);
    *out = (sqlite3_int64)(d * 86400000.0);
    return rc;
}

static void wb_register(void)
{
    sqlite3_vfs *parent;

    if (sqlite3_initialize() != SQLITE_OK || !(parent = sqlite3_vfs_find(NULL)))
        return;
    wb_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)WB_ROUND8(sizeof(wb_file_t)) + parent->szOsFile,
        .mxPathname = parent->mxPathname,
        .zName = WB_NAME,
        .pAppData = parent,
        .xOpen = wb_open,
        .xDelete = wb_delete,
        .xAccess = wb_access,
        .xFullPathname = wb_fullpath,
        .xDlOpen = wb_dlopen,
        .xDlError = wb_dlerror,
        .xDlSym = wb_dlsym,
        .xDlClose = wb_dlclose,
        .xRandomness = wb_random,
        .xSleep = wb_sleep,
        .xCurrentTime = wb_time,
        .xGetLastError = wb_lasterr,
        .xCurrentTimeInt64 = wb_time64,
    };
    wb_ok = sqlite3_vfs_register(&wb_vfs, 0) == SQLITE_OK;
}

const char *store_walbuf_vfs(void)
{
    pthread_once(&wb_once, wb_register);
    return wb_ok ? WB_NAME : NULL;
}
