#include "store/sqlite/wal_coalescing_vfs.h"

#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace allot::store::sqlite {
namespace {

struct CoalescingVfs {
  sqlite3_vfs vfs;  // what SQLite holds; its pAppData is this object
  sqlite3_vfs* underlying;
};

sqlite3_vfs* underlyingOf(sqlite3_vfs* vfs) {
  return static_cast<CoalescingVfs*>(vfs->pAppData)->underlying;
}

// What SQLite allocates for one of our files (szOsFile bytes, zeroed): this object, then the
// underlying VFS's file.
struct File {
  sqlite3_file base;  // first: SQLite hands us a sqlite3_file*
  sqlite3_io_methods methods;
  sqlite3_file* real = nullptr;
  bool coalesces = false;  // a WAL whose device overwrites power-safely (see vfsOpen)
  // A coalescing WAL and its database's file, each the other's, while both are open: the
  // database's file is where SQLite takes and releases the WAL's write lock.
  File* walOfDatabase = nullptr;
  File* databaseOfWal = nullptr;
  // Writes not yet in the file, which continue one another from pendingAt; at most
  // kCoalescedWriteBytes, reserved at the first write.
  std::vector<char> pending;
  sqlite3_int64 pendingAt = 0;
  // A failed write of what was pending, found by a file control, whose result SQLite may not
  // act on, for the next sync to report. What it lost belongs to the transaction in progress
  // (every commit syncs, and a sync writes everything first), and failing that transaction's sync
  // is what keeps its frames out of the WAL's index.
  int deferredError = SQLITE_OK;

  // Writes what is pending. Every caller but xFileControl returns its error to SQLite, which then
  // fails the transaction in progress: the error is not kept, or it would fail the next one too.
  int flush() {
    if (pending.empty()) return SQLITE_OK;
    const int rc =
        real->pMethods->xWrite(real, pending.data(), static_cast<int>(pending.size()), pendingAt);
    pending.clear();
    return rc;
  }
};

constexpr size_t kFileHead = (sizeof(File) + 15) & ~size_t{15};

File* asFile(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

sqlite3_file* real(sqlite3_file* f) { return asFile(f)->real; }

int flushPending(sqlite3_file* f) { return asFile(f)->flush(); }

// Drops what is pending, unwritten: where every commit syncs, whatever is still pending when the
// WAL's write lock is released or the WAL is closed is a transaction that was rolled back. Written
// later, it would land past the last commit, where another writer (an operator's sqlite3 shell)
// may meanwhile have committed frames of its own.
void dropPending(File* wal) {
  wal->pending.clear();
  wal->deferredError = SQLITE_OK;
}

int fileClose(sqlite3_file* f) {
  File* file = asFile(f);
  dropPending(file);
  if (file->walOfDatabase != nullptr) file->walOfDatabase->databaseOfWal = nullptr;
  if (file->databaseOfWal != nullptr) file->databaseOfWal->walOfDatabase = nullptr;
  const int closed = file->real->pMethods->xClose(file->real);
  file->~File();
  return closed;
}

int fileRead(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  if (int rc = flushPending(f); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xRead(real(f), buffer, amount, offset);
}

int fileWrite(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  File* file = asFile(f);
  if (!file->coalesces) return file->real->pMethods->xWrite(file->real, data, amount, offset);
  const auto pendingEnd = file->pendingAt + static_cast<sqlite3_int64>(file->pending.size());
  const bool continues =
      offset == pendingEnd &&
      static_cast<int64_t>(file->pending.size()) + amount <= kCoalescedWriteBytes;
  if (!file->pending.empty() && !continues) {
    if (int rc = file->flush(); rc != SQLITE_OK) return rc;
  }
  if (amount >=
      kCoalescedWriteBytes)  // nothing to gain from a copy (SQLite writes a frame at most)
    return file->real->pMethods->xWrite(file->real, data, amount, offset);
  if (file->pending.empty()) file->pendingAt = offset;
  const auto* bytes = static_cast<const char*>(data);
  try {
    if (file->pending.capacity() == 0) file->pending.reserve(kCoalescedWriteBytes);
    file->pending.insert(file->pending.end(), bytes, bytes + amount);
  } catch (const std::bad_alloc&) {
    return SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

int fileTruncate(sqlite3_file* f, sqlite3_int64 size) {
  if (int rc = flushPending(f); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xTruncate(real(f), size);
}

int fileSync(sqlite3_file* f, int flags) {
  File* file = asFile(f);
  const int flushed = file->flush();
  const int deferred = std::exchange(file->deferredError, SQLITE_OK);
  if (flushed != SQLITE_OK) return flushed;
  if (deferred != SQLITE_OK) return deferred;
  return file->real->pMethods->xSync(file->real, flags);
}

int fileSize(sqlite3_file* f, sqlite3_int64* size) {
  if (int rc = flushPending(f); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xFileSize(real(f), size);
}

int fileLock(sqlite3_file* f, int level) { return real(f)->pMethods->xLock(real(f), level); }

int fileUnlock(sqlite3_file* f, int level) { return real(f)->pMethods->xUnlock(real(f), level); }

int fileCheckReservedLock(sqlite3_file* f, int* out) {
  return real(f)->pMethods->xCheckReservedLock(real(f), out);
}

int fileControl(sqlite3_file* f, int op, void* arg) {
  File* file = asFile(f);
  if (int rc = file->flush(); rc != SQLITE_OK && file->deferredError == SQLITE_OK)
    file->deferredError = rc;
  return file->real->pMethods->xFileControl(file->real, op, arg);
}

int fileSectorSize(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }

int fileDeviceCharacteristics(sqlite3_file* f) {
  return real(f)->pMethods->xDeviceCharacteristics(real(f));
}

int fileShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return real(f)->pMethods->xShmMap(real(f), region, size, extend, out);
}

// SQLite's WAL write lock is the first of the shared-memory locks (WAL_WRITE_LOCK in wal.c).
constexpr int kWalWriteLock = 0;

int fileShmLock(sqlite3_file* f, int offset, int n, int flags) {
  File* file = asFile(f);
  const bool releasesWriteLock =
      (flags & SQLITE_SHM_UNLOCK) != 0 && offset <= kWalWriteLock && kWalWriteLock < offset + n;
  if (releasesWriteLock && file->walOfDatabase != nullptr) dropPending(file->walOfDatabase);
  return file->real->pMethods->xShmLock(file->real, offset, n, flags);
}

void fileShmBarrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }

int fileShmUnmap(sqlite3_file* f, int deleteFlag) {
  return real(f)->pMethods->xShmUnmap(real(f), deleteFlag);
}

int fileFetch(sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
  if (int rc = flushPending(f); rc != SQLITE_OK) return rc;
  return real(f)->pMethods->xFetch(real(f), offset, amount, out);
}

int fileUnfetch(sqlite3_file* f, sqlite3_int64 offset, void* page) {
  return real(f)->pMethods->xUnfetch(real(f), offset, page);
}

// Our methods, at the underlying file's version: SQLite asks for shared memory (WAL) and memory
// mapping only of files whose methods' version offers them.
sqlite3_io_methods methodsLike(const sqlite3_io_methods& under) {
  sqlite3_io_methods m{};
  m.iVersion = under.iVersion < 3 ? under.iVersion : 3;
  m.xClose = fileClose;
  m.xRead = fileRead;
  m.xWrite = fileWrite;
  m.xTruncate = fileTruncate;
  m.xSync = fileSync;
  m.xFileSize = fileSize;
  m.xLock = fileLock;
  m.xUnlock = fileUnlock;
  m.xCheckReservedLock = fileCheckReservedLock;
  m.xFileControl = fileControl;
  m.xSectorSize = fileSectorSize;
  m.xDeviceCharacteristics = fileDeviceCharacteristics;
  if (m.iVersion >= 2) {
    m.xShmMap = under.xShmMap != nullptr ? fileShmMap : nullptr;
    m.xShmLock = under.xShmLock != nullptr ? fileShmLock : nullptr;
    m.xShmBarrier = under.xShmBarrier != nullptr ? fileShmBarrier : nullptr;
    m.xShmUnmap = under.xShmUnmap != nullptr ? fileShmUnmap : nullptr;
  }
  if (m.iVersion >= 3) {
    m.xFetch = under.xFetch != nullptr ? fileFetch : nullptr;
    m.xUnfetch = under.xUnfetch != nullptr ? fileUnfetch : nullptr;
  }
  return m;
}

int vfsOpen(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* f, int flags, int* outFlags) {
  sqlite3_vfs* under = underlyingOf(vfs);
  File* file = new (f) File{};
  file->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + kFileHead);
  // The underlying VFS gets itself, not us: SQLite's unix VFS picks its locking from its own
  // pAppData.
  const int rc = under->xOpen(under, name, file->real, flags, outFlags);
  if (file->real->pMethods == nullptr) {  // nothing to close: SQLite must not call our xClose
    file->~File();
    f->pMethods = nullptr;
    return rc;
  }
  file->methods = methodsLike(*file->real->pMethods);
  f->pMethods = &file->methods;
  // Only the WAL, and only where SQLite syncs before the index names a commit's frames. Without
  // power-safe overwrite SQLite pads a commit to a sector and writes the padding after its sync
  // (walWriteToLog), which would then reach the file only after the index named it. SQLite asks
  // the database file (sqlite3WalOpen), which has it unless the build's default or the URI's
  // `psow=0` says otherwise: the WAL's own file answers for the first, the name's parameters (a
  // WAL's name shares its database's) for the second. The database file is left alone: a
  // checkpoint that stops short of the WAL's end does not sync it before it lets readers at the
  // pages it wrote (sqlite3WalCheckpoint).
  // And only a WAL whose database's file is ours (it always is: SQLite opens both through one
  // VFS), so that a rollback's frames are dropped when the write lock is released (dropPending).
  const bool wal = rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) != 0 && name != nullptr;
  sqlite3_file* database = wal ? sqlite3_database_file_object(name) : nullptr;
  File* ourDatabase = database != nullptr && database->pMethods != nullptr &&
                              database->pMethods->xShmLock == fileShmLock
                          ? asFile(database)
                          : nullptr;
  file->coalesces = ourDatabase != nullptr && ourDatabase->walOfDatabase == nullptr &&
                    (file->real->pMethods->xDeviceCharacteristics(file->real) &
                     SQLITE_IOCAP_POWERSAFE_OVERWRITE) != 0 &&
                    sqlite3_uri_boolean(name, "psow", 1) != 0;
  if (file->coalesces) {
    ourDatabase->walOfDatabase = file;
    file->databaseOfWal = ourDatabase;
  }
  return rc;
}

int vfsDelete(sqlite3_vfs* vfs, const char* name, int syncDir) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xDelete(u, name, syncDir);
}

int vfsAccess(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xAccess(u, name, flags, out);
}

int vfsFullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xFullPathname(u, name, n, out);
}

void* vfsDlOpen(sqlite3_vfs* vfs, const char* name) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xDlOpen(u, name);
}

void vfsDlError(sqlite3_vfs* vfs, int n, char* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  u->xDlError(u, n, out);
}

void (*vfsDlSym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xDlSym(u, handle, symbol);
}

void vfsDlClose(sqlite3_vfs* vfs, void* handle) {
  sqlite3_vfs* u = underlyingOf(vfs);
  u->xDlClose(u, handle);
}

int vfsRandomness(sqlite3_vfs* vfs, int n, char* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xRandomness(u, n, out);
}

int vfsSleep(sqlite3_vfs* vfs, int micros) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xSleep(u, micros);
}

int vfsCurrentTime(sqlite3_vfs* vfs, double* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xCurrentTime(u, out);
}

int vfsGetLastError(sqlite3_vfs* vfs, int n, char* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xGetLastError(u, n, out);
}

int vfsCurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xCurrentTimeInt64(u, out);
}

int vfsSetSystemCall(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr call) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xSetSystemCall(u, name, call);
}

sqlite3_syscall_ptr vfsGetSystemCall(sqlite3_vfs* vfs, const char* name) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xGetSystemCall(u, name);
}

const char* vfsNextSystemCall(sqlite3_vfs* vfs, const char* name) {
  sqlite3_vfs* u = underlyingOf(vfs);
  return u->xNextSystemCall(u, name);
}

}  // namespace

int registerWalCoalescingVfs(const char* name, sqlite3_vfs* underlying) {
  if (underlying == nullptr) return SQLITE_ERROR;
  // Registered VFSes stay for the process's life, as SQLite's own do.
  auto* self = new (std::nothrow) CoalescingVfs{};
  if (self == nullptr) return SQLITE_NOMEM;
  sqlite3_vfs& v = self->vfs;
  self->underlying = underlying;
  v.iVersion = underlying->iVersion < 3 ? underlying->iVersion : 3;
  v.szOsFile = static_cast<int>(kFileHead) + underlying->szOsFile;
  v.mxPathname = underlying->mxPathname;
  v.zName = name;
  v.pAppData = self;
  v.xOpen = vfsOpen;
  v.xDelete = vfsDelete;
  v.xAccess = vfsAccess;
  v.xFullPathname = vfsFullPathname;
  v.xDlOpen = underlying->xDlOpen != nullptr ? vfsDlOpen : nullptr;
  v.xDlError = underlying->xDlError != nullptr ? vfsDlError : nullptr;
  v.xDlSym = underlying->xDlSym != nullptr ? vfsDlSym : nullptr;
  v.xDlClose = underlying->xDlClose != nullptr ? vfsDlClose : nullptr;
  v.xRandomness = vfsRandomness;
  v.xSleep = vfsSleep;
  v.xCurrentTime = vfsCurrentTime;
  v.xGetLastError = vfsGetLastError;
  if (v.iVersion >= 2 && underlying->xCurrentTimeInt64 != nullptr)
    v.xCurrentTimeInt64 = vfsCurrentTimeInt64;
  if (v.iVersion >= 3) {
    v.xSetSystemCall = underlying->xSetSystemCall != nullptr ? vfsSetSystemCall : nullptr;
    v.xGetSystemCall = underlying->xGetSystemCall != nullptr ? vfsGetSystemCall : nullptr;
    v.xNextSystemCall = underlying->xNextSystemCall != nullptr ? vfsNextSystemCall : nullptr;
  }
  const int rc = sqlite3_vfs_register(&v, 0);
  if (rc != SQLITE_OK) delete self;
  return rc;
}

const char* walCoalescingVfsName() {
  static const char* const kName = "allot-wal-coalescing";
  static const char* registered = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    if (sqlite3_initialize() != SQLITE_OK) return;
    if (registerWalCoalescingVfs(kName, sqlite3_vfs_find(nullptr)) == SQLITE_OK) registered = kName;
  });
  return registered;  // nullptr (SQLite's default VFS) if it could not be registered
}

}  // namespace allot::store::sqlite
