//! Bootstrapping ranks that are processes through the launcher users
//! already run: the PMI-1 protocol, served by MPICH's hydra (`mpiexec`) and
//! by Slurm's pmi2 plugin (`srun --mpi=pmi2` answers PMI-1 clients), a few
//! text lines over a socket the launcher hands over (`PMI_FD`, or
//! `PMI_PORT` and `PMI_ID`); and PMIx, served by Open MPI's `mpirun` and
//! Slurm's pmix plugin (`srun --mpi=pmix`), through the PMIx library,
//! loaded only when a PMIx launcher started the process ([`pmix`]).
//!
//! A rank puts its address into the job's key-value space, passes the
//! barrier, and gets every peer's ([`Pmi::exchange`]).

pub mod pmix;
pub mod protocol;

use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

pub use protocol::PmiError;
use protocol::{check_word, read_message};

/// What a PMI connection runs over.
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A connection to the launcher's PMI server.
pub struct Pmi {
    conn: Conn,
    rank: u16,
    size: u16,
    kvsname: String,
    keylen_max: usize,
    vallen_max: usize,
}

/// Which protocol the launcher speaks.
enum Conn {
    One(BufReader<Box<dyn Stream>>),
    X(Box<pmix::Client>),
}

/// The longest value rmx puts through PMIx (which sets no limit of its
/// own that a client can ask).
const PMIX_VALLEN: usize = 1 << 16;

/// MPICH's launcher by its unambiguous name: where Open MPI is installed
/// too, Debian's alternatives may make plain `mpiexec` Open MPI's, which
/// speaks PMIx, not PMI-1.
pub const HYDRA: &str = "mpiexec.hydra";

/// The environment variable that bounds every wait for the launcher, in
/// seconds: a launcher that stalls (silent, or stopping part way through
/// a line) fails the rank with [`PmiError::Timeout`] instead of hanging it.
pub const TIMEOUT_ENV: &str = "RMX_PMI_TIMEOUT";

/// How long a rank waits for any PMI reply unless [`TIMEOUT_ENV`] says:
/// long enough for a launcher to start a large job (the barrier waits for
/// every rank), short enough that a stalled one is reported.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The bound on every PMI wait: [`TIMEOUT_ENV`] seconds (at least 1), else
/// [`DEFAULT_TIMEOUT`].
pub fn timeout() -> Result<std::time::Duration, PmiError> {
    match env_number(TIMEOUT_ENV)? {
        Some(0) => Err(PmiError::Env(format!(
            "{TIMEOUT_ENV}=0: give at least 1 second"
        ))),
        Some(s) => Ok(std::time::Duration::from_secs(s)),
        None => Ok(DEFAULT_TIMEOUT),
    }
}

/// `PMI_FD` is taken at most once: the connection owns (and closes) it.
static FD_TAKEN: AtomicBool = AtomicBool::new(false);

fn env_number(name: &str) -> Result<Option<u64>, PmiError> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(_) => Err(PmiError::Env(format!("{name} is not text"))),
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| PmiError::Env(format!("{name}={v:?} is not a number"))),
    }
}

/// The job's size and this rank, checked: 1 to 65 535 ranks.
fn rank_and_size(rank: u64, size: u64) -> Result<(u16, u16), PmiError> {
    if size == 0 || size > u16::MAX as u64 || rank >= size {
        return Err(PmiError::Env(format!(
            "rank {rank} of {size}: a job has 1 to 65535 ranks, numbered from 0"
        )));
    }
    Ok((rank as u16, size as u16))
}

/// Launchers whose environment shows without PMI-1: the variable that
/// tells, and who set it.
const FOREIGN: [(&str, &str); 2] = [
    ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun without PMIx"),
    (
        "SLURM_STEP_NUM_TASKS",
        "srun without --mpi=pmi2 or --mpi=pmix",
    ),
];

/// Why this process cannot be a rank of the job its launcher started: the
/// environment is a launcher's (Open MPI, a multi-task Slurm step) but
/// offers neither a PMI-1 connection nor PMIx, so every process would run
/// the whole job alone. `None` when either is there or no launcher is seen.
pub fn foreign_launcher() -> Option<String> {
    if launched() {
        return None;
    }
    let (var, who) = FOREIGN.iter().find(|(var, _)| match std::env::var(var) {
        // A one-task Slurm step is a plain command.
        Ok(v) if *var == "SLURM_STEP_NUM_TASKS" => v.trim().parse::<u64>().is_ok_and(|n| n > 1),
        Ok(_) => true,
        Err(_) => false,
    })?;
    Some(format!(
        "started by {who} ({var} is set) with neither PMI-1 nor PMIx, so each process would run the whole job alone: start rmx with MPICH's `{HYDRA} -n 2 rmx …`, Open MPI's `mpirun -n 2 rmx …`, or `srun --mpi=pmi2` or `--mpi=pmix`"
    ))
}

/// Whether a launcher that rmx bootstraps through (PMI-1 or PMIx)
/// started this process.
pub fn launched() -> bool {
    std::env::var_os("PMI_FD").is_some()
        || std::env::var_os("PMI_PORT").is_some()
        || pmix::launched()
}

/// This process's rank as its launcher's environment says (PMI-1's
/// `PMI_RANK`, PMIx's `PMIX_RANK`), for messages before PMI is reached.
pub fn env_rank() -> Option<String> {
    std::env::var("PMI_RANK")
        .or_else(|_| std::env::var("PMIX_RANK"))
        .ok()
}

/// Keeps this process alive through hydra's notice that another process
/// of the job ended. With `-disable-auto-cleanup` hydra leaves the others
/// running, so that they may fail the dead rank themselves, and tells them
/// by SIGUSR1, whose default action would end them at once: rmx finds the
/// dead rank itself (a failed connection or silence), so the signal is
/// ignored. Only for processes a launcher started; an embedding program
/// keeps its own signal dispositions.
pub fn ignore_launcher_notice() {
    if env_rank().is_some() {
        // SAFETY: SIG_IGN is no handler; nothing runs in signal context.
        unsafe { libc::signal(libc::SIGUSR1, libc::SIG_IGN) };
    }
}

impl Pmi {
    /// Connects as the launcher's environment says. `Ok(None)`: this
    /// process was not started by a PMI launcher (no `PMI_FD`, no `PMI_PORT`).
    pub fn from_env() -> Result<Option<Pmi>, PmiError> {
        if std::env::var_os("PMI_FD").is_none()
            && std::env::var_os("PMI_PORT").is_none()
            && pmix::launched()
        {
            let c = pmix::Client::connect()?;
            return Ok(Some(Pmi {
                rank: c.rank(),
                size: c.size(),
                conn: Conn::X(Box::new(c)),
                kvsname: String::new(),
                keylen_max: 0,
                vallen_max: PMIX_VALLEN,
            }));
        }
        if let Some(fd) = env_number("PMI_FD")? {
            let fd = i32::try_from(fd).map_err(|_| PmiError::Env(format!("PMI_FD={fd}")))?;
            let (rank, size) = match (env_number("PMI_RANK")?, env_number("PMI_SIZE")?) {
                (Some(r), Some(s)) => rank_and_size(r, s)?,
                _ => {
                    return Err(PmiError::Env(
                        "PMI_FD is set without PMI_RANK and PMI_SIZE".into(),
                    ))
                }
            };
            let sock = take_fd(fd)?;
            set_read_timeout(&sock, timeout()?)?;
            return Pmi::over(Box::new(sock), rank, size).map(Some);
        }
        if let Ok(port) = std::env::var("PMI_PORT") {
            let id = env_number("PMI_ID")?
                .ok_or_else(|| PmiError::Env("PMI_PORT is set without PMI_ID".into()))?;
            let tcp = std::net::TcpStream::connect_timeout(&resolve(&port)?, timeout()?)
                .map_err(|e| PmiError::Io(format!("connecting to PMI_PORT={port}: {e}")))?;
            tcp.set_read_timeout(Some(timeout()?))
                .map_err(|e| PmiError::Io(e.to_string()))?;
            return Pmi::over_port(Box::new(tcp), id).map(Some);
        }
        Ok(None)
    }

    /// `PMI_PORT`'s handshake on `stream`: `initack` with the id, then the
    /// launcher sets size, rank and debug.
    pub fn over_port(stream: Box<dyn Stream>, id: u64) -> Result<Pmi, PmiError> {
        let mut conn = BufReader::new(stream);
        send(&mut conn, &format!("cmd=initack pmiid={id}"))?;
        read_message(&mut conn)?.expect("initack")?;
        let mut set = |key: &'static str| -> Result<u64, PmiError> {
            let m = read_message(&mut conn)?.expect("set")?;
            let v = m.required(key)?;
            v.parse()
                .map_err(|_| PmiError::Malformed(format!("set {key}={v}")))
        };
        let size = set("size")?;
        let rank = set("rank")?;
        set("debug")?;
        let (rank, size) = rank_and_size(rank, size)?;
        Pmi::init(conn, rank, size)
    }

    /// PMI over a connected `stream` (the launcher's `PMI_FD`), as rank
    /// `rank` of `size`.
    pub fn over(stream: Box<dyn Stream>, rank: u16, size: u16) -> Result<Pmi, PmiError> {
        Pmi::init(BufReader::new(stream), rank, size)
    }

    fn init(mut conn: BufReader<Box<dyn Stream>>, rank: u16, size: u16) -> Result<Pmi, PmiError> {
        send(&mut conn, "cmd=init pmi_version=1 pmi_subversion=1")?;
        let m = read_message(&mut conn)?.expect("response_to_init")?;
        if m.get("pmi_version").is_some_and(|v| v != "1") {
            return Err(PmiError::Malformed(format!(
                "the launcher speaks PMI version {:?}, not 1",
                m.get("pmi_version")
            )));
        }
        send(&mut conn, "cmd=get_maxes")?;
        let m = read_message(&mut conn)?.expect("maxes")?;
        let max = |k: &str| -> Result<usize, PmiError> {
            let v = m.required(k)?;
            v.parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| PmiError::Malformed(format!("maxes {k}={v}")))
        };
        let (keylen_max, vallen_max) = (max("keylen_max")?, max("vallen_max")?);
        send(&mut conn, "cmd=get_my_kvsname")?;
        let m = read_message(&mut conn)?.expect("my_kvsname")?;
        let kvsname = m.required("kvsname")?.to_string();
        check_word("kvsname", &kvsname, protocol::MAX_LINE)?;
        Ok(Pmi {
            conn: Conn::One(conn),
            rank,
            size,
            kvsname,
            keylen_max,
            vallen_max,
        })
    }

    pub fn rank(&self) -> u16 {
        self.rank
    }

    /// The launcher's protocol as reports name it: "PMI" (PMI-1) or "PMIx".
    pub fn protocol(&self) -> &'static str {
        match self.conn {
            Conn::One(_) => "PMI",
            Conn::X(_) => "PMIx",
        }
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    /// The longest value the launcher stores.
    pub fn vallen_max(&self) -> usize {
        self.vallen_max
    }

    /// Stores `value` under `key` in the job's key-value space (visible to
    /// the others after the next barrier).
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let conn = match &mut self.conn {
            Conn::X(c) => {
                if value.len() > self.vallen_max {
                    return Err(PmiError::BadArgument(format!(
                        "a value of {} bytes: at most {}",
                        value.len(),
                        self.vallen_max
                    )));
                }
                return c.put(key, value);
            }
            Conn::One(conn) => conn,
        };
        check_word("key", key, self.keylen_max)?;
        check_word("value", value, self.vallen_max)?;
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        send(conn, &line)?;
        read_message(conn)?.expect("put_result")?;
        Ok(())
    }

    /// Waits until every rank has entered the barrier (and, over PMIx,
    /// published what it put).
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        let conn = match &mut self.conn {
            Conn::X(c) => return c.barrier(),
            Conn::One(conn) => conn,
        };
        send(conn, "cmd=barrier_in")?;
        read_message(conn)?.expect("barrier_out")?;
        Ok(())
    }

    /// The value rank `rank` stored under `key` (PMI-1's key space is the
    /// job's, PMIx's each rank's).
    pub fn get(&mut self, rank: u16, key: &str) -> Result<String, PmiError> {
        let conn = match &mut self.conn {
            Conn::X(c) => return c.get(rank, key),
            Conn::One(conn) => conn,
        };
        check_word("key", key, self.keylen_max)?;
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        send(conn, &line)?;
        let m = read_message(conn)?.expect("get_result")?;
        Ok(m.required("value")?.to_string())
    }

    /// Puts `mine` as this rank's `what`, passes the barrier, and returns
    /// every rank's (this one's included), by rank.
    pub fn exchange(&mut self, what: &str, mine: &str) -> Result<Vec<String>, PmiError> {
        self.put(&format!("{what}-{}", self.rank), mine)?;
        self.barrier()?;
        (0..self.size)
            .map(|r| {
                if r == self.rank {
                    Ok(mine.to_string())
                } else {
                    self.get(r, &format!("{what}-{r}"))
                }
            })
            .collect()
    }

    /// Tells the launcher this rank is done with PMI.
    pub fn finalize(self) -> Result<(), PmiError> {
        let mut conn = match self.conn {
            Conn::X(c) => return c.finalize(),
            Conn::One(conn) => conn,
        };
        send(&mut conn, "cmd=finalize")?;
        read_message(&mut conn)?.expect("finalize_ack")?;
        Ok(())
    }
}

fn send(conn: &mut BufReader<Box<dyn Stream>>, line: &str) -> Result<(), PmiError> {
    let w = conn.get_mut();
    w.write_all(format!("{line}\n").as_bytes())
        .and_then(|()| w.flush())
        .map_err(|e| PmiError::Io(e.to_string()))
}

/// `PMI_PORT`'s `host:port` as a socket address.
fn resolve(port: &str) -> Result<std::net::SocketAddr, PmiError> {
    use std::net::ToSocketAddrs;
    port.trim()
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| PmiError::Env(format!("PMI_PORT={port} is no host:port")))
}

/// Bounds every read of the launcher's socket by `t` (`SO_RCVTIMEO`).
fn set_read_timeout(sock: &std::fs::File, t: std::time::Duration) -> Result<(), PmiError> {
    use std::os::fd::AsRawFd;
    let tv = libc::timeval {
        tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a valid socket descriptor this process owns and a timeval of
    // the size passed; setsockopt reads it and keeps nothing.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(PmiError::Io(format!(
            "cannot bound reads of PMI_FD: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The launcher's socket `fd`, owned from here on (closed on drop).
fn take_fd(fd: i32) -> Result<std::fs::File, PmiError> {
    use std::os::fd::FromRawFd;
    // A launcher hands over a socket above the standard streams; anything
    // else (stdout, a file this process opened) is not its to take.
    // SAFETY: fstat fills `st` for an open descriptor and touches nothing else.
    let socket = fd > 2
        && unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
        };
    if !socket {
        return Err(PmiError::Env(format!(
            "PMI_FD={fd} is not an open socket above the standard streams"
        )));
    }
    if FD_TAKEN.swap(true, Ordering::AcqRel) {
        return Err(PmiError::Env(format!(
            "PMI_FD={fd} is already in use by this process's PMI connection"
        )));
    }
    // SAFETY: the descriptor is an open socket the launcher handed to this
    // process for PMI, and the flag above lets only one `File` own it.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::os::unix::net::UnixStream;

    /// A launcher that answers each request with the scripted reply, after
    /// checking the request starts as expected; `None` closes the socket.
    fn launcher(script: Vec<(&'static str, Option<&'static str>)>) -> UnixStream {
        let (mine, theirs) = UnixStream::pair().unwrap();
        std::thread::spawn(move || {
            let mut r = BufReader::new(theirs.try_clone().unwrap());
            let mut w = theirs;
            for (want, reply) in script {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                assert!(line.starts_with(want), "sent {line:?}, expected {want:?}");
                match reply {
                    Some(rep) => w.write_all(rep.as_bytes()).unwrap(),
                    None => return,
                }
            }
        });
        mine
    }

    const HELLO: [(&str, Option<&str>); 3] = [
        (
            "cmd=init pmi_version=1 pmi_subversion=1\n",
            Some("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"),
        ),
        (
            "cmd=get_maxes\n",
            Some("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"),
        ),
        (
            "cmd=get_my_kvsname\n",
            Some("cmd=my_kvsname kvsname=kvs_7_0\n"),
        ),
    ];

    #[test]
    fn a_rank_puts_its_address_passes_the_barrier_and_gets_its_peers() {
        let mut script = HELLO.to_vec();
        script.extend([
            (
                "cmd=put kvsname=kvs_7_0 key=addr-1 value=beef\n",
                Some("cmd=put_result rc=0 msg=success\n"),
            ),
            ("cmd=barrier_in\n", Some("cmd=barrier_out\n")),
            (
                "cmd=get kvsname=kvs_7_0 key=addr-0\n",
                Some("cmd=get_result rc=0 msg=success value=cafe\n"),
            ),
            (
                "cmd=get kvsname=kvs_7_0 key=addr-2\n",
                Some("cmd=get_result rc=0 msg=success value=f00d\n"),
            ),
            ("cmd=finalize\n", Some("cmd=finalize_ack\n")),
        ]);
        let mut p = Pmi::over(Box::new(launcher(script)), 1, 3).unwrap();
        assert_eq!((p.rank(), p.size(), p.vallen_max()), (1, 3, 1024));
        assert_eq!(
            p.exchange("addr", "beef").unwrap(),
            ["cafe", "beef", "f00d"]
        );
        p.finalize().unwrap();
    }

    /// A launcher that stalls after init, silent or stopping part way
    /// through a line with its socket open, fails the rank once the read
    /// timeout passes (before, reads had no bound and the rank hung).
    #[test]
    fn a_stalled_launcher_is_a_timeout_not_a_hang() {
        for stall in ["", "cmd=barrier_o"] {
            let mut script = HELLO.to_vec();
            script.push(("cmd=barrier_in", Some(stall)));
            // Then it holds the socket open, waiting for a line that never comes.
            script.push(("never", None));
            let sock = launcher(script);
            sock.set_read_timeout(Some(std::time::Duration::from_millis(200)))
                .unwrap();
            let mut p = Pmi::over(Box::new(sock), 0, 2).unwrap();
            let t0 = std::time::Instant::now();
            assert_eq!(p.barrier(), Err(PmiError::Timeout), "{stall:?}");
            let took = t0.elapsed();
            assert!(took < std::time::Duration::from_secs(5), "{took:?}");
            assert!(PmiError::Timeout.to_string().contains(TIMEOUT_ENV));
        }
    }

    #[test]
    fn a_refusal_a_wrong_reply_and_a_closed_socket_are_errors() {
        let mut script = HELLO.to_vec();
        script.push((
            "cmd=get kvsname=kvs_7_0 key=nobody",
            Some("cmd=get_result rc=-1 msg=key_nobody_not_found value=unknown\n"),
        ));
        script.push(("cmd=barrier_in", Some("cmd=put_result rc=0\n")));
        script.push(("cmd=barrier_in", Some("cmd=barrier_o")));
        let mut p = Pmi::over(Box::new(launcher(script)), 0, 2).unwrap();
        assert_eq!(
            p.get(0, "nobody"),
            Err(PmiError::Failed {
                rc: "-1".into(),
                msg: "key_nobody_not_found".into()
            })
        );
        assert!(matches!(p.barrier(), Err(PmiError::Unexpected { .. })));
        assert!(matches!(p.barrier(), Err(PmiError::Truncated(_))));
        // Words the protocol cannot carry never leave.
        assert!(matches!(p.put("a key", "v"), Err(PmiError::BadArgument(_))));
        assert!(matches!(
            p.put("k", &"v".repeat(1025)),
            Err(PmiError::BadArgument(_))
        ));
        // A launcher that hangs up during the handshake.
        let gone = launcher(vec![("cmd=init", None)]);
        assert!(matches!(
            Pmi::over(Box::new(gone), 0, 1),
            Err(PmiError::Truncated(_))
        ));
        let old = launcher(vec![(
            "cmd=init",
            Some("cmd=response_to_init pmi_version=2 rc=0\n"),
        )]);
        assert!(matches!(
            Pmi::over(Box::new(old), 0, 1),
            Err(PmiError::Malformed(_))
        ));
    }

    #[test]
    fn pmi_port_handshake_sets_rank_and_size() {
        let mut script = vec![(
            "cmd=initack pmiid=5\n",
            Some("cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n"),
        )];
        script.extend(HELLO);
        let p = Pmi::over_port(Box::new(launcher(script)), 5).unwrap();
        assert_eq!((p.rank(), p.size()), (2, 4));
        let bad = launcher(vec![(
            "cmd=initack",
            Some("cmd=initack\ncmd=set size=2\ncmd=set rank=7\ncmd=set debug=0\n"),
        )]);
        assert!(matches!(
            Pmi::over_port(Box::new(bad), 0),
            Err(PmiError::Env(_))
        ));
    }
}
