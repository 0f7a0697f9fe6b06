//! The power-cut filesystem of T20 (tests/it/concurrency/power.rs): a FUSE filesystem, mounted on
//! the database folder, that keeps what programs see (the page cache) apart from what the disk
//! holds, so a simulated power cut can throw away exactly what a real one would.
//!
//! Every file holds two images: `data`, what reads return (every `write` and `ftruncate` lands
//! there at once, as in the page cache), and `disk`, what survives a cut. Each write or size
//! change not yet made durable is also recorded, in order, as a pending operation on its file;
//! `fsync` and `fdatasync` apply that file's pending operations to its disk image. Names are
//! treated the same way: `create`, `mkdir`, `unlink`, `rmdir` and `rename` change the names
//! programs see at once and are logged; they reach the disk only when a directory is fsynced
//! (strict POSIX: an `fsync` of a file does not make its name durable, which ext4 happens to do
//! and other filesystems do not).
//!
//! A cut ([`Fs::arm`]) fires at a chosen operation number: that operation and every one after it
//! is answered `EIO` and applied nowhere, so the cut falls between two system calls. The disk after
//! the cut ([`Fs::disk_after_cut`]) is the durable names and images, plus, by [`CutMode`]:
//! - [`CutMode::Lose`]: nothing else (every unsynced write lost);
//! - [`CutMode::Reorder`]: each pending write or size change of a file kept or lost at random,
//!   independently of the others (a disk cache that flushes in any order), and a random prefix of
//!   the pending name changes (a journal);
//! - [`CutMode::Torn`]: as Reorder, at 512-byte sector granularity: each sector a pending write
//!   covered is kept or lost on its own, so one write can land in part (writes that follow one
//!   another end to start count as one: the kernel may split a `write()` at any byte). Bytes a write did not
//!   cover never change (SQLite's powersafe-overwrite assumption, which holds on real disks).
//!
//! The test then unmounts and mounts a new filesystem holding that disk, with nothing cached:
//! programs see what a disk would have after the cut.
//!
//! File contents live in memory (a database of a few MB); POSIX locks are left to the kernel
//! (the init reply does not ask for `FUSE_POSIX_LOCKS`, so the kernel keeps them locally, which
//! is correct for processes on one machine), and shared `mmap` of SQLite's `-shm` goes through
//! the kernel's page cache of this filesystem (opened with `FOPEN_KEEP_CACHE`; nothing changes
//! the files behind the kernel's back).
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    AccessFlags, BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation,
    INodeNo, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
    WriteFlags,
};

pub const SECTOR: u64 = 512;
const TTL: Duration = Duration::from_secs(1);
const ROOT: u64 = 1;

/// What of the unsynced state reaches the disk at a cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CutMode {
    Lose,
    Reorder,
    Torn,
}

impl CutMode {
    pub fn name(self) -> &'static str {
        match self {
            CutMode::Lose => "lose",
            CutMode::Reorder => "reorder",
            CutMode::Torn => "torn",
        }
    }

    pub fn parse(s: &str) -> Option<CutMode> {
        match s.trim() {
            "lose" => Some(CutMode::Lose),
            "reorder" => Some(CutMode::Reorder),
            "torn" => Some(CutMode::Torn),
            _ => None,
        }
    }
}

/// A file's change not yet on the disk.
#[derive(Clone, Debug)]
enum Pending {
    Write { off: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug)]
enum Body {
    File { data: Vec<u8>, disk: Vec<u8>, pending: Vec<Pending> },
    Dir { entries: BTreeMap<OsString, u64>, disk_entries: BTreeMap<OsString, u64> },
}

#[derive(Debug)]
struct Node {
    body: Body,
    perm: u16,
    uid: u32,
    gid: u32,
    mtime: SystemTime,
    ctime: SystemTime,
}

/// One name change: every `(dir, name, Some(ino) | None)` assignment it made, applied together.
type NameChange = Vec<(u64, OsString, Option<u64>)>;

/// A folder as the disk holds it: relative path → file bytes (and mode); folders listed too.
#[derive(Clone, Debug, Default)]
pub struct DiskImage {
    pub files: BTreeMap<PathBuf, (u16, Vec<u8>)>,
    pub dirs: BTreeMap<PathBuf, u16>,
}

impl DiskImage {
    /// The regular files and folders under `dir` on a real filesystem.
    pub fn read_dir(dir: &Path) -> io::Result<DiskImage> {
        use std::os::unix::fs::PermissionsExt;
        let mut img = DiskImage::default();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for e in std::fs::read_dir(dir.join(&rel))? {
                let e = e?;
                let md = e.metadata()?;
                let r = rel.join(e.file_name());
                let perm = (md.permissions().mode() & 0o7777) as u16;
                if md.is_dir() {
                    img.dirs.insert(r.clone(), perm);
                    stack.push(r);
                } else if md.is_file() {
                    img.files.insert(r, (perm, std::fs::read(e.path())?));
                }
            }
        }
        Ok(img)
    }

    /// Write the image out under `dir` (for a look at a failing cut).
    pub fn write_to(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for d in self.dirs.keys() {
            std::fs::create_dir_all(dir.join(d))?;
        }
        for (p, (_, bytes)) in &self.files {
            std::fs::write(dir.join(p), bytes)?;
        }
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.files.values().map(|(_, b)| b.len()).sum()
    }
}

/// Counters of one mount.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Operations that change files or names (the ones a cut is counted in).
    pub ops: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub fsyncs: u64,
    pub dir_fsyncs: u64,
    /// Requests answered `EIO` because the power was already cut.
    pub refused_after_cut: u64,
}

struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    /// Name changes not yet durable, oldest first.
    names_log: Vec<NameChange>,
    stats: Stats,
    /// The operation number at which the power goes (counted in `stats.ops`, from 1).
    cut_at: Option<u64>,
    cut: bool,
    /// When the cut fired.
    cut_time: Option<Instant>,
    /// A control for the harness: `fsync` answers success and makes nothing durable (a disk that
    /// ignores flushes), so acknowledged writes must be lost at the next cut.
    lying_fsync: bool,
}

/// Shared state of one mounted filesystem; the test holds it to arm and read the cut.
pub struct Fs {
    st: Mutex<State>,
    cut_cv: Condvar,
}

fn now() -> SystemTime {
    SystemTime::now()
}

fn write_at(buf: &mut Vec<u8>, off: u64, data: &[u8]) {
    let off = off as usize;
    let end = off + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[off..end].copy_from_slice(data);
}

/// Writes that follow one another end to start become one: the kernel may hand one `write()` to
/// the filesystem in pieces split at any byte (a short copy from user memory), while a disk sees
/// whole sectors of the page cache. Without this a sector could tear inside at a split.
fn coalesce(pending: &[Pending]) -> Vec<Pending> {
    let mut out: Vec<Pending> = Vec::with_capacity(pending.len());
    for p in pending {
        if let (Some(Pending::Write { off, data }), Pending::Write { off: next, data: more }) =
            (out.last_mut(), p)
        {
            if *off + data.len() as u64 == *next {
                data.extend_from_slice(more);
                continue;
            }
        }
        out.push(p.clone());
    }
    out
}

/// A write landing in part: each 512-byte sector it covers kept or lost on its own.
fn tear(bytes: &mut Vec<u8>, off: u64, data: &[u8], coin: &mut dyn FnMut() -> u64) {
    let end = off + data.len() as u64;
    let mut s = off;
    while s < end {
        let e = (((s / SECTOR) + 1) * SECTOR).min(end);
        if coin() & 1 == 1 {
            write_at(bytes, s, &data[(s - off) as usize..(e - off) as usize]);
        }
        s = e;
    }
}

fn apply(buf: &mut Vec<u8>, p: &Pending) {
    match p {
        Pending::Write { off, data } => write_at(buf, *off, data),
        Pending::SetLen(n) => buf.resize(*n as usize, 0),
    }
}

impl Fs {
    /// A filesystem whose disk (and page cache) hold `img`.
    pub fn new(img: &DiskImage) -> Arc<Fs> {
        let t = now();
        let mut nodes = HashMap::new();
        nodes.insert(
            ROOT,
            Node {
                body: Body::Dir { entries: BTreeMap::new(), disk_entries: BTreeMap::new() },
                perm: 0o700,
                uid: 0,
                gid: 0,
                mtime: t,
                ctime: t,
            },
        );
        let mut st = State {
            nodes,
            next_ino: ROOT + 1,
            names_log: Vec::new(),
            stats: Stats::default(),
            cut_at: None,
            cut: false,
            cut_time: None,
            lying_fsync: false,
        };
        // folders first, shortest paths first, so every parent exists
        let mut dirs: Vec<(&PathBuf, &u16)> = img.dirs.iter().collect();
        dirs.sort_by_key(|(p, _)| p.components().count());
        for (p, perm) in dirs {
            let body = Body::Dir { entries: BTreeMap::new(), disk_entries: BTreeMap::new() };
            st.insert_durable(p, body, *perm);
        }
        for (p, (perm, bytes)) in &img.files {
            let body = Body::File { data: bytes.clone(), disk: bytes.clone(), pending: Vec::new() };
            st.insert_durable(p, body, *perm);
        }
        Arc::new(Fs { st: Mutex::new(st), cut_cv: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cut the power at the `n`-th changing operation from now (1 = the next one).
    pub fn arm(&self, n: u64) {
        let mut st = self.lock();
        st.cut_at = Some(st.stats.ops + n.max(1));
    }

    /// Cut the power now, between whatever operations are in flight.
    pub fn cut_now(&self) {
        let mut st = self.lock();
        if !st.cut {
            st.cut = true;
            st.cut_time = Some(Instant::now());
            self.cut_cv.notify_all();
        }
    }

    /// Wait up to `timeout` for the armed cut; true once it has fired.
    pub fn wait_cut(&self, timeout: Duration) -> bool {
        let st = self.lock();
        let (st, _) =
            self.cut_cv.wait_timeout_while(st, timeout, |s| !s.cut).unwrap_or_else(|e| e.into_inner());
        st.cut
    }

    pub fn is_cut(&self) -> bool {
        self.lock().cut
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats.clone()
    }

    /// Make `fsync` a no-op that reports success (the harness' control).
    pub fn set_lying_fsync(&self, on: bool) {
        self.lock().lying_fsync = on;
    }

    /// Bytes of unsynced file changes pending right now.
    pub fn pending_bytes(&self) -> u64 {
        let st = self.lock();
        st.nodes
            .values()
            .map(|n| match &n.body {
                Body::File { pending, .. } => pending
                    .iter()
                    .map(|p| match p {
                        Pending::Write { data, .. } => data.len() as u64,
                        Pending::SetLen(_) => 0,
                    })
                    .sum(),
                Body::Dir { .. } => 0,
            })
            .sum()
    }

    /// Unsynced bytes per file name (under the root folder) right now: which files were being
    /// written when the power went (a `-wal` commit, a checkpoint into the database file, …).
    pub fn pending_by_name(&self) -> BTreeMap<OsString, u64> {
        let st = self.lock();
        let Some(Node { body: Body::Dir { entries, .. }, .. }) = st.nodes.get(&ROOT) else {
            return BTreeMap::new();
        };
        entries
            .iter()
            .filter_map(|(name, ino)| match &st.nodes[ino].body {
                Body::File { pending, .. } if !pending.is_empty() => Some((
                    name.clone(),
                    pending
                        .iter()
                        .map(|p| match p {
                            Pending::Write { data, .. } => data.len() as u64,
                            Pending::SetLen(_) => 0,
                        })
                        .sum(),
                )),
                _ => None,
            })
            .collect()
    }

    /// What the disk holds after the cut, with `mode` deciding the fate of unsynced changes;
    /// `coin` returns random bits.
    pub fn disk_after_cut(&self, mode: CutMode, coin: &mut dyn FnMut() -> u64) -> DiskImage {
        let st = self.lock();
        // the names: durable ones, plus (not in Lose mode) a random prefix of the pending log
        let mut names: HashMap<u64, BTreeMap<OsString, u64>> = st
            .nodes
            .iter()
            .filter_map(|(ino, n)| match &n.body {
                Body::Dir { disk_entries, .. } => Some((*ino, disk_entries.clone())),
                Body::File { .. } => None,
            })
            .collect();
        let keep_names = match mode {
            CutMode::Lose => 0,
            _ => (coin() % (st.names_log.len() as u64 + 1)) as usize,
        };
        for change in &st.names_log[..keep_names] {
            for (dir, name, ino) in change {
                let d = names.entry(*dir).or_default();
                match ino {
                    Some(i) => d.insert(name.clone(), *i),
                    None => d.remove(name),
                };
            }
        }
        let mut img = DiskImage::default();
        let mut stack = vec![(ROOT, PathBuf::new())];
        while let Some((dir, rel)) = stack.pop() {
            let Some(entries) = names.get(&dir) else { continue };
            for (name, ino) in entries {
                let Some(node) = st.nodes.get(ino) else { continue };
                let path = rel.join(name);
                match &node.body {
                    Body::Dir { .. } => {
                        img.dirs.insert(path.clone(), node.perm);
                        stack.push((*ino, path));
                    }
                    Body::File { disk, pending, .. } => {
                        let mut bytes = disk.clone();
                        let pending = match mode {
                            CutMode::Torn => coalesce(pending),
                            _ => pending.clone(),
                        };
                        for p in &pending {
                            match (mode, p) {
                                (CutMode::Lose, _) => {}
                                (CutMode::Reorder, _) | (CutMode::Torn, Pending::SetLen(_)) => {
                                    if coin() & 1 == 1 {
                                        apply(&mut bytes, p);
                                    }
                                }
                                (CutMode::Torn, Pending::Write { off, data }) => {
                                    tear(&mut bytes, *off, data, coin)
                                }
                            }
                        }
                        img.files.insert(path, (node.perm, bytes));
                    }
                }
            }
        }
        img
    }
}

impl State {
    fn insert_durable(&mut self, path: &Path, body: Body, perm: u16) {
        let mut dir = ROOT;
        let comps: Vec<&OsStr> = path.iter().collect();
        for c in &comps[..comps.len() - 1] {
            dir = match &self.nodes[&dir].body {
                Body::Dir { entries, .. } => entries[*c],
                Body::File { .. } => panic!("{} is under a file", path.display()),
            };
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let t = now();
        self.nodes.insert(ino, Node { body, perm, uid: 0, gid: 0, mtime: t, ctime: t });
        if let Body::Dir { entries, disk_entries } = &mut self.nodes.get_mut(&dir).unwrap().body {
            entries.insert(comps[comps.len() - 1].to_owned(), ino);
            disk_entries.insert(comps[comps.len() - 1].to_owned(), ino);
        }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let n = self.nodes.get(&ino)?;
        let (kind, size, nlink) = match &n.body {
            Body::File { data, .. } => (FileType::RegularFile, data.len() as u64, 1),
            Body::Dir { entries, .. } => (FileType::Directory, 4096, 2 + entries.len() as u32),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: n.mtime,
            mtime: n.mtime,
            ctime: n.ctime,
            crtime: n.ctime,
            kind,
            perm: n.perm,
            nlink,
            uid: n.uid,
            gid: n.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Count a changing operation; false when the power is (now) cut and it must not apply.
    fn changing_op(&mut self, cv: &Condvar) -> bool {
        if self.cut {
            self.stats.refused_after_cut += 1;
            return false;
        }
        self.stats.ops += 1;
        if self.cut_at.is_some_and(|n| self.stats.ops >= n) {
            self.cut = true;
            self.cut_time = Some(Instant::now());
            self.stats.refused_after_cut += 1;
            cv.notify_all();
            return false;
        }
        true
    }

    /// A read-only request: refused once the power is cut.
    fn alive(&mut self) -> bool {
        if self.cut {
            self.stats.refused_after_cut += 1;
        }
        !self.cut
    }

    fn dir_entries(&mut self, dir: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match self.nodes.get_mut(&dir).map(|n| &mut n.body) {
            Some(Body::Dir { entries, .. }) => Ok(entries),
            Some(Body::File { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn lookup(&mut self, dir: u64, name: &OsStr) -> Result<u64, Errno> {
        self.dir_entries(dir)?.get(name).copied().ok_or(Errno::ENOENT)
    }

    /// Add a new node under `dir/name` (a logged name change).
    fn make(&mut self, dir: u64, name: &OsStr, body: Body, perm: u16, req: &Request) -> Result<u64, Errno> {
        if self.dir_entries(dir)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let t = now();
        self.nodes.insert(ino, Node { body, perm, uid: req.uid(), gid: req.gid(), mtime: t, ctime: t });
        self.dir_entries(dir)?.insert(name.to_owned(), ino);
        self.names_log.push(vec![(dir, name.to_owned(), Some(ino))]);
        Ok(ino)
    }

    fn file(&mut self, ino: u64) -> Result<(&mut Vec<u8>, &mut Vec<Pending>), Errno> {
        match self.nodes.get_mut(&ino).map(|n| &mut n.body) {
            Some(Body::File { data, pending, .. }) => Ok((data, pending)),
            Some(Body::Dir { .. }) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn touch(&mut self, ino: u64) {
        if let Some(n) = self.nodes.get_mut(&ino) {
            let t = now();
            n.mtime = t;
            n.ctime = t;
        }
    }
}

/// The `fuser` filesystem: every request takes the one lock (requests are served one at a
/// time by one session thread, so the operation count is exact).
pub struct PowerFs(pub Arc<Fs>);

impl PowerFs {
    fn st(&self) -> MutexGuard<'_, State> {
        self.0.lock()
    }
}

impl fuser::Filesystem for PowerFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut st = self.st();
        if !st.alive() {
            return reply.error(Errno::EIO);
        }
        match st.lookup(parent.0, name) {
            Ok(ino) => reply.entry(&TTL, &st.attr(ino).unwrap(), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let mut st = self.st();
        if !st.alive() {
            return reply.error(Errno::EIO);
        }
        match st.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.st();
        let changes = size.is_some() || mode.is_some() || uid.is_some() || gid.is_some();
        if changes && !st.changing_op(&self.0.cut_cv) || !changes && !st.alive() {
            return reply.error(Errno::EIO);
        }
        if !st.nodes.contains_key(&ino.0) {
            return reply.error(Errno::ENOENT);
        }
        if let Some(n) = size {
            match st.file(ino.0) {
                Ok((data, pending)) => {
                    data.resize(n as usize, 0);
                    pending.push(Pending::SetLen(n));
                }
                Err(e) => return reply.error(e),
            }
            st.touch(ino.0);
        }
        let node = st.nodes.get_mut(&ino.0).unwrap();
        if let Some(m) = mode {
            node.perm = (m & 0o7777) as u16;
        }
        if let Some(u) = uid {
            node.uid = u;
        }
        if let Some(g) = gid {
            node.gid = g;
        }
        if let Some(t) = mtime {
            node.mtime = match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => now(),
            };
        }
        reply.attr(&TTL, &st.attr(ino.0).unwrap());
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        let body = Body::File { data: Vec::new(), disk: Vec::new(), pending: Vec::new() };
        match st.make(parent.0, name, body, (mode & !umask & 0o7777) as u16, req) {
            Ok(ino) => reply.entry(&TTL, &st.attr(ino).unwrap(), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        let body = Body::Dir { entries: BTreeMap::new(), disk_entries: BTreeMap::new() };
        match st.make(parent.0, name, body, (mode & !umask & 0o7777) as u16, req) {
            Ok(ino) => reply.entry(&TTL, &st.attr(ino).unwrap(), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        let ino = match st.lookup(parent.0, name) {
            Ok(i) => i,
            Err(e) => return reply.error(e),
        };
        if matches!(st.nodes[&ino].body, Body::Dir { .. }) {
            return reply.error(Errno::EISDIR);
        }
        st.dir_entries(parent.0).unwrap().remove(name);
        st.names_log.push(vec![(parent.0, name.to_owned(), None)]);
        reply.ok();
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        let ino = match st.lookup(parent.0, name) {
            Ok(i) => i,
            Err(e) => return reply.error(e),
        };
        match &st.nodes[&ino].body {
            Body::Dir { entries, .. } if entries.is_empty() => {}
            Body::Dir { .. } => return reply.error(Errno::ENOTEMPTY),
            Body::File { .. } => return reply.error(Errno::ENOTDIR),
        }
        st.dir_entries(parent.0).unwrap().remove(name);
        st.names_log.push(vec![(parent.0, name.to_owned(), None)]);
        reply.ok();
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let ino = match st.lookup(parent.0, name) {
            Ok(i) => i,
            Err(e) => return reply.error(e),
        };
        match st.lookup(newparent.0, newname) {
            Ok(_) if flags.contains(RenameFlags::RENAME_NOREPLACE) => return reply.error(Errno::EEXIST),
            Ok(old) => {
                if let Body::Dir { entries, .. } = &st.nodes[&old].body {
                    if !entries.is_empty() {
                        return reply.error(Errno::ENOTEMPTY);
                    }
                }
            }
            Err(Errno::ENOENT) => {}
            Err(e) => return reply.error(e),
        }
        st.dir_entries(parent.0).unwrap().remove(name);
        st.dir_entries(newparent.0).unwrap().insert(newname.to_owned(), ino);
        st.names_log
            .push(vec![(parent.0, name.to_owned(), None), (newparent.0, newname.to_owned(), Some(ino))]);
        reply.ok();
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let mut st = self.st();
        if !st.alive() {
            return reply.error(Errno::EIO);
        }
        if !st.nodes.contains_key(&ino.0) {
            return reply.error(Errno::ENOENT);
        }
        reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut st = self.st();
        if !st.alive() {
            return reply.error(Errno::EIO);
        }
        match st.file(ino.0) {
            Ok((data, _)) => {
                let start = (offset as usize).min(data.len());
                let end = (start + size as usize).min(data.len());
                reply.data(&data[start..end]);
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        bytes: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        st.stats.writes += 1;
        st.stats.bytes_written += bytes.len() as u64;
        match st.file(ino.0) {
            Ok((data, pending)) => {
                write_at(data, offset, bytes);
                pending.push(Pending::Write { off: offset, data: bytes.to_vec() });
            }
            Err(e) => return reply.error(e),
        }
        st.touch(ino.0);
        reply.written(bytes.len() as u32);
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        st.stats.fsyncs += 1;
        if st.lying_fsync {
            return reply.ok();
        }
        match st.nodes.get_mut(&ino.0).map(|n| &mut n.body) {
            Some(Body::File { disk, pending, .. }) => {
                for p in pending.drain(..) {
                    apply(disk, &p);
                }
                reply.ok()
            }
            Some(Body::Dir { .. }) => reply.ok(),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let mut st = self.st();
        if !st.alive() {
            return reply.error(Errno::EIO);
        }
        let entries: Vec<(u64, FileType, OsString)> = match st.nodes.get(&ino.0).map(|n| &n.body) {
            Some(Body::Dir { entries, .. }) => {
                let mut v =
                    vec![(ino.0, FileType::Directory, ".".into()), (ino.0, FileType::Directory, "..".into())];
                for (name, i) in entries {
                    let kind = match st.nodes[i].body {
                        Body::Dir { .. } => FileType::Directory,
                        Body::File { .. } => FileType::RegularFile,
                    };
                    v.push((*i, kind, name.clone()));
                }
                v
            }
            Some(Body::File { .. }) => return reply.error(Errno::ENOTDIR),
            None => return reply.error(Errno::ENOENT),
        };
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        st.stats.dir_fsyncs += 1;
        if st.lying_fsync {
            return reply.ok();
        }
        // a journal commit: every name change so far reaches the disk
        for n in st.nodes.values_mut() {
            if let Body::Dir { entries, disk_entries } = &mut n.body {
                disk_entries.clone_from(entries);
            }
        }
        st.names_log.clear();
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        let ino = match st.lookup(parent.0, name) {
            Ok(_) if flags & libc::O_EXCL != 0 => return reply.error(Errno::EEXIST),
            Ok(i) => i,
            Err(Errno::ENOENT) => {
                let body = Body::File { data: Vec::new(), disk: Vec::new(), pending: Vec::new() };
                match st.make(parent.0, name, body, (mode & !umask & 0o7777) as u16, req) {
                    Ok(i) => i,
                    Err(e) => return reply.error(e),
                }
            }
            Err(e) => return reply.error(e),
        };
        reply.created(
            &TTL,
            &st.attr(ino).unwrap(),
            Generation(0),
            FileHandle(0),
            FopenFlags::FOPEN_KEEP_CACHE,
        );
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let mut st = self.st();
        if !st.changing_op(&self.0.cut_cv) {
            return reply.error(Errno::EIO);
        }
        match st.file(ino.0) {
            Ok((data, pending)) => {
                let end = offset + length;
                if (data.len() as u64) < end {
                    data.resize(end as usize, 0);
                    pending.push(Pending::SetLen(end));
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }
}

/// A mounted [`Fs`]; dropping it unmounts.
pub struct Mounted {
    pub fs: Arc<Fs>,
    session: Option<BackgroundSession>,
    path: PathBuf,
}

/// Mount a filesystem holding `img` on `path` (an existing empty folder).
pub fn mount(path: &Path, img: &DiskImage) -> io::Result<Mounted> {
    let fs = Fs::new(img);
    let mut cfg = Config::default();
    cfg.mount_options = vec![MountOption::FSName("keepsake-powercut".into()), MountOption::NoAtime];
    let session = fuser::spawn_mount(PowerFs(fs.clone()), path, &cfg)?;
    Ok(Mounted { fs, session: Some(session), path: path.to_path_buf() })
}

impl Mounted {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Unmount and wait for the session thread. Every process using the mount must be gone; a
    /// busy mount is retried for 5 s, then detached and its connection aborted.
    pub fn unmount(mut self) -> io::Result<()> {
        self.do_unmount()
    }

    fn do_unmount(&mut self) -> io::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        let c = std::ffi::CString::new(self.path.as_os_str().as_encoded_bytes()).unwrap();
        let dev = std::fs::metadata(&self.path).map(|m| std::os::unix::fs::MetadataExt::dev(&m)).ok();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = io::Error::other("not tried");
        loop {
            // SAFETY: umount2 with a valid NUL-terminated path.
            if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
                break;
            }
            last = io::Error::last_os_error();
            if Instant::now() > deadline {
                // SAFETY: as above.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
                if let Some(d) = dev {
                    let minor = libc::minor(d);
                    let _ = std::fs::write(format!("/sys/fs/fuse/connections/{minor}/abort"), "1");
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let joined = session.join();
        if Instant::now() > deadline {
            return Err(io::Error::other(format!("unmount of {} was busy: {last}", self.path.display())));
        }
        joined
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = self.do_unmount();
    }
}

/// Whether this machine can mount FUSE filesystems here (`/dev/fuse` exists).
pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One write the kernel split mid-sector still tears only at sector boundaries.
    #[test]
    fn a_write_split_mid_sector_tears_only_between_sectors() {
        let split = [
            Pending::Write { off: 300, data: vec![b'n'; 3500] },
            Pending::Write { off: 3800, data: vec![b'n'; 500] },
            Pending::SetLen(8192),
            Pending::Write { off: 5000, data: vec![b'm'; 10] },
        ];
        let merged = coalesce(&split);
        assert_eq!(merged.len(), 3, "{merged:?}");
        assert!(matches!(&merged[0], Pending::Write { off: 300, data } if data.len() == 4000));
        let mut bits = 0x5555_5555_5555_5555u64;
        for round in 0..64 {
            let mut bytes = vec![b'o'; 8192];
            let Pending::Write { off, data } = &merged[0] else { unreachable!() };
            let mut coin = || {
                bits = bits.rotate_left(round + 1) ^ 0x9e37_79b9_7f4a_7c15;
                bits
            };
            tear(&mut bytes, *off, data, &mut coin);
            for s in (0..8192usize).step_by(512) {
                let part = &bytes[s.max(300)..(s + 512).min(4300).max(s.max(300))];
                assert!(
                    part.iter().all(|c| *c == part.first().copied().unwrap_or(b'o')),
                    "sector {s} torn inside"
                );
            }
        }
        // without the merge, the sector holding the split (3584..4096) could tear inside
        let mut bytes = vec![b'o'; 8192];
        let mut flips = [1u64, 0].into_iter().cycle();
        for p in &split[..2] {
            let Pending::Write { off, data } = p else { unreachable!() };
            tear(&mut bytes, *off, data, &mut || flips.next().unwrap());
        }
        assert_ne!(bytes[3700], bytes[3900], "the unmerged pieces tear sector 3584 inside");
    }
}
