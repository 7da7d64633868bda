// Package fsstore is a storage.ObjectStore on a POSIX file system: one
// directory per availability zone stands for that AZ's bucket. It runs on a
// local disk (tests, a single host, the demo) and on shared file systems
// every broker mounts: NFS, Amazon EFS, and Amazon FSx for Lustre, NetApp
// ONTAP and OpenZFS. A leader writes combined objects to its own AZ's
// directory; followers read their byte ranges from whichever directory a
// metadata entry's bucket names.
//
//	store, err := fsstore.New(fsstore.Options{
//		Buckets: map[string]fsstore.Bucket{
//			"use1-az4": {Dir: "/mnt/wal-az4"},
//			"use1-az5": {Dir: "/mnt/wal-az5"},
//			"use1-az6": {Dir: "/mnt/wal-az6"},
//		},
//		LocalAZ: "use1-az4",
//	})
//
// A bucket's name, which object references and metadata entries carry, is
// Bucket.Name, or the AZ when that is empty; every broker of a deployment
// must use the same names, wherever each mounts the directories.
//
// # Guarantees
//
//   - Put never overwrites, and readers see a whole object or none. Put
//     writes the body to a temporary file in the key's directory, syncs it
//     (fsync), closes it (NFS reports deferred write errors on close),
//     then publishes it with link(2) to the key's name, which fails with
//     EEXIST if the name exists: storage.ErrAlreadyExists. It then
//     unlinks the temporary name and syncs the directory, so that the new
//     name survives a crash; Put succeeds only after that.
//   - rename(2) would be wrong: it replaces an existing name atomically, so
//     two writers of one key would both succeed and the last would win.
//     (Linux's renameat2 with RENAME_NOREPLACE does not replace, but NFS
//     does not support it.) Creating the key's name itself with O_EXCL
//     would refuse a taken key, but show readers an object still being
//     written.
//   - On NFS (v3 and v4, so EFS and FSx too), LINK is one operation the
//     server performs atomically, refusing an existing name (NFS3ERR_EXIST,
//     NFS4ERR_EXIST); RFC 1813 and RFC 8881 define it so, and open(2)'s
//     manual recommends link for exclusive creation over NFS. LINK is not
//     idempotent: if its reply is lost, the client sends it again, and the
//     retry can answer EEXIST for the link the first attempt made. So,
//     also as open(2)'s manual says, Put checks after any failed link
//     whether the key's name is now its own file (same device and inode)
//     and then succeeds. NFS servers commit directory operations to stable
//     storage before answering, so the directory sync costs nothing there;
//     on ext4 or XFS it is what makes the link durable. EFS makes data
//     durable and visible to other clients once fsync or close returns
//     (close-to-open consistency), which is what Put waits for.
//   - A reader looks a key up only after its writer's Put returned (the
//     engines publish the metadata entry naming it afterwards), so no NFS
//     client holds a stale "not found" for the name, and close-to-open
//     consistency gives it the synced bytes. List reads directories, which
//     an NFS client may serve from its attribute cache for up to acdirmax
//     (60s by default): it can miss the newest objects for that long.
//   - GetRange opens the file and reads exactly the bytes asked for with
//     one pread: a range not wholly inside the object is
//     storage.ErrInvalidRange, checked against the file's size, never a
//     short result. The result is a new slice. ReadRange
//     (storage.RangeReader) reads into the caller's buffer instead,
//     through a small staging chunk (see below).
//   - Delete unlinks each object (idempotent: a missing one is not an
//     error) and syncs the directories it removed from. It checks every
//     reference before removing anything. It leaves directories in place:
//     removing one would race with a Put creating an object in it, and the
//     engines write all of a broker's objects into one directory
//     (KeyPrefix + broker id).
//   - Nothing is touched for a call that cannot be valid: a reference to a
//     bucket the store was not configured with (or to a configured bucket
//     under another AZ's name) is storage.ErrUnknownBucket, a malformed
//     range storage.ErrInvalidRange, an invalid key ErrInvalidKey, and a
//     context already done its own error.
//
// # Keys and the directory layout
//
// A key's segments, split at "/", become a path below the bucket
// directory: "cluster-a/1/lx3k-9f2.wal" is the file
// cluster-a%/1%/lx3k-9f2.wal. Directories carry a trailing "%", so that
// keys "a" and "a/b" can coexist as in S3; in names, "%" is written %25
// and a leading "." %2E. No object's file name therefore starts with ".",
// which leaves that namespace to the store's temporary files (.tmp-*), the
// NFS client's .nfsXXXX files, and "." and "..".
//
// Keys no object can have are refused with ErrInvalidKey: empty, longer
// than 1024 bytes (S3's limit), not valid UTF-8, containing a NUL byte,
// with an empty segment (a leading "/", so no absolute path; a trailing or
// doubled "/"), with a segment "." or "..", or with a segment whose name
// would exceed 254 bytes (NAME_MAX less the directory marker). Every
// other key maps to a path of plain names below the bucket directory, so
// no key can reach outside it; a fuzz test checks this. The store never
// creates symbolic links and does not follow them in List; a bucket
// directory is trusted not to contain links planted by someone else, who
// could as well overwrite objects.
//
// List returns only what the store could have written: regular files whose
// names are the escapes of valid segments, in directories named likewise.
// Temporary files, dot files and anything else put in a bucket by other
// means are skipped, so a foreign file is never taken for an object.
//
// The file system must be case-sensitive, as POSIX ones are (NFS exports
// of them, EFS, FSx for Lustre and OpenZFS; not macOS's default APFS
// volume, where keys that differ only in case would collide).
//
// # Temporary files
//
// Put removes its temporary file on every path out of it, failures
// included. A writer that crashes (or loses its host) between creating
// and removing one leaves it behind: List removes temporary files older
// than Options.TempMaxAge (default 15 minutes, by modification time) in
// the directories it reads. A broker's Node.Sweep lists the broker's own
// directory, so a broker that runs Sweep at start and periodically (which
// the objects a crashed incarnation left need anyway) also cleans up its
// temporary files. TempMaxAge
// must exceed the longest a Put writes for: a temporary file removed
// under a slow writer makes that Put fail (its link finds no file), never
// publish a partial object.
//
// # Contexts and a file server that stops answering
//
// File system calls cannot be cancelled, and on a hard NFS mount (the
// default, and what EFS recommends) a call to a server that stopped
// answering blocks in the kernel until the server is back. GetRange,
// ReadRange, Delete and List therefore do their work in a goroutine and return when
// the caller's context ends, with its error; the goroutine ends when the
// kernel returns. Each bucket allows Options.MaxPending calls in progress,
// abandoned ones included: a call that finds them all held waits for one
// until its context ends, and its error then says so. So a hung AZ's
// directory holds at most MaxPending goroutines and never slows the calls
// to other buckets. Put is the exception: it returns only after the
// kernel does, because it must not read body after returning; the
// engines bound concurrent uploads (NodeConfig.MaxInflight), and a Put
// that does not return makes the leader report itself degraded.
// ReadRange, which must not write to the caller's buffer after returning
// either, preads into a staging chunk of the store's and copies each chunk
// into the buffer only while the caller waits: a read it gave up on ends
// at its next chunk, having written nothing more.
//
// # Errors
//
// Every error is an *Error naming the operation, bucket and key, matching
// under errors.Is the sentinel it was classified as and, through
// errors.As, the *fs.PathError or *os.LinkError with the file's path and
// the syscall.Errno:
//
//	cause                                              sentinel
//	ENOENT, ENOTDIR (GetRange)                         storage.ErrNotFound
//	a file that is not a regular file (GetRange)       storage.ErrNotFound
//	EEXIST from link (Put)                             storage.ErrAlreadyExists
//	range past the end of the file (GetRange)          storage.ErrInvalidRange
//	EIO, ESTALE, ETIMEDOUT, EINTR, EAGAIN, EBUSY,      storage.ErrUnavailable
//	ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM, ENOLCK,
//	the network errors of an NFS mount
//	a file shorter than its size said while read       storage.ErrUnavailable
//	the bucket directory missing or not a directory    storage.ErrUnavailable
//	EACCES, EPERM, EROFS, EMLINK, ELOOP, EXDEV,        none: an operator must act
//	a file where a key's directory belongs (Put)
//	the caller's context cancelled or expired          none: errors.Is(err, context.Canceled / DeadlineExceeded)
//
// ENOSPC and EDQUOT are ErrUnavailable because garbage collection frees
// space as followers catch up: the engines retry, and report themselves
// degraded if it lasts. ESTALE means a file or directory was removed on
// the server behind the client's back; the next attempt looks the name up
// again and finds the object or ErrNotFound. A bucket directory that has
// gone (removed, or a file system not mounted yet) is ErrUnavailable
// rather than ErrNotFound, so followers wait instead of giving up on every
// object in it. The store cannot tell an unmounted file system whose
// mount point is an empty directory from an empty bucket: mount the file
// systems before the broker starts.
//
// # Timestamps and permissions
//
// ObjectInfo.LastModified is the file's modification time, set by the
// clock of the host or NFS server that wrote it; Node.Sweep compares it
// with the broker's clock, so choose its age well above any clock skew.
// Files and directories are created with modes 0666 and 0777 less the
// process's umask; brokers of different users need a umask and group
// that let them read and delete each other's objects.
//
// The package builds everywhere Go does, but its guarantees are those of
// POSIX file systems; on Windows hard links and names behave otherwise.
package fsstore
