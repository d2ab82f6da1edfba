//! Connections made on demand, for transports whose connections need both
//! ends' numbers before either can send (verbs' RC queue pairs): the first
//! send to a peer asks for one over a datagram channel (REQ with this
//! end's queue pair and first sequence number), the peer makes its end and
//! answers (REP), the asker connects and confirms (RTU). Datagrams may be
//! lost: requests and answers are repeated until answered, and every
//! message may come twice. When both ends ask at once, the lower rank's
//! request wins. Pure: the shell passes in time and messages and does what
//! the [`Action`] says.
//!
//! A peer process that restarts is not supported: it would ask again with
//! a new queue pair, while this end is connected to its old one. Such a
//! request ([`Action::Restarted`]) fails the peer here, so nothing waits
//! on a connection that leads nowhere; a job whose rank died ends.

/// Bytes of one handshake message.
pub const LEN: usize = 16;
const MAGIC: u8 = 0xC7;
/// A request or an answer unanswered for this long is sent again.
pub const RETRY_NS: u64 = 20_000_000;
/// A peer that answers nothing for this long is given up.
pub const GIVE_UP_NS: u64 = 10_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// "Make your end; mine is `qpn`, starting at `psn`."
    Req = 1,
    /// "Made and connected to yours; mine is `qpn` at `psn`."
    Rep = 2,
    /// "Connected: send."
    Rtu = 3,
}

/// One handshake message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub kind: Kind,
    /// The sender's rank.
    pub from: u16,
    /// The sender's secret from its published address: a datagram that
    /// does not carry it is not from that rank.
    pub nonce: u32,
    /// The sender's queue pair number and first packet sequence number
    /// (24 bits each).
    pub qpn: u32,
    pub psn: u32,
}

/// Why bytes are no handshake message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgError {
    Short(usize),
    Magic(u8),
    Kind(u8),
    /// A queue pair number or sequence number wider than 24 bits.
    Wide,
}

const MASK: u32 = 0x00ff_ffff;

impl Msg {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0] = MAGIC;
        b[1] = self.kind as u8;
        b[2..4].copy_from_slice(&self.from.to_le_bytes());
        b[4..8].copy_from_slice(&self.nonce.to_le_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_le_bytes());
        b[12..16].copy_from_slice(&self.psn.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Msg, MsgError> {
        if b.len() < LEN {
            return Err(MsgError::Short(b.len()));
        }
        if b[0] != MAGIC {
            return Err(MsgError::Magic(b[0]));
        }
        let kind = match b[1] {
            1 => Kind::Req,
            2 => Kind::Rep,
            3 => Kind::Rtu,
            k => return Err(MsgError::Kind(k)),
        };
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (qpn, psn) = (word(8), word(12));
        if qpn > MASK || psn > MASK {
            return Err(MsgError::Wide);
        }
        Ok(Msg {
            kind,
            from: u16::from_le_bytes([b[2], b[3]]),
            nonce: word(4),
            qpn,
            psn,
        })
    }
}

/// One peer's connection, as this end sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Nothing made.
    Idle,
    /// This end made its queue pair and asked (last at `since`, first at
    /// `first`).
    Asked { since: u64, first: u64 },
    /// This end answered a request from queue pair `qpn` and waits for
    /// the confirmation.
    Answered { since: u64, first: u64, qpn: u32 },
    /// Connected both ways, to the peer's queue pair `qpn`: sends may go.
    Ready { qpn: u32 },
    /// The peer answered nothing for [`GIVE_UP_NS`].
    Failed,
}

/// What the shell does next for one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Nothing,
    /// Make this end's queue pair (if not made yet) and send a REQ.
    Ask,
    /// Make this end's queue pair if not made yet, connect it to the
    /// peer's `qpn` at `psn`, and send a REP.
    ConnectAndAnswer {
        qpn: u32,
        psn: u32,
    },
    /// Send the REP again (the queue pair stays as it is).
    Answer,
    /// Connect this end's queue pair to `qpn` at `psn` and send an RTU.
    ConnectAndConfirm {
        qpn: u32,
        psn: u32,
    },
    /// Send the RTU again.
    Confirm,
    /// The peer asked again from another queue pair while connected: it
    /// restarted, which is unsupported. The peer is now
    /// [`State::Failed`]: fail it (its connection leads nowhere).
    Restarted,
}

impl State {
    /// A send to the peer is wanted at `now`: ask, or ask again when the
    /// last request or answer went unanswered for [`RETRY_NS`].
    pub fn want(&mut self, now: u64) -> Action {
        // A clock that went back: the waits count from now.
        if let State::Asked { since, first } | State::Answered { since, first, .. } = self {
            if now < *since {
                *since = now.saturating_sub(RETRY_NS);
                *first = (*first).min(now);
            }
        }
        match *self {
            State::Idle => {
                *self = State::Asked {
                    since: now,
                    first: now,
                };
                Action::Ask
            }
            State::Asked { since, first } | State::Answered { since, first, .. } => {
                if now.saturating_sub(first) >= GIVE_UP_NS {
                    *self = State::Failed;
                    return Action::Nothing;
                }
                if now.saturating_sub(since) < RETRY_NS {
                    return Action::Nothing;
                }
                match self {
                    State::Asked { since, .. } => {
                        *since = now;
                        Action::Ask
                    }
                    State::Answered { since, .. } => {
                        *since = now;
                        Action::Answer
                    }
                    _ => Action::Nothing,
                }
            }
            State::Ready { .. } | State::Failed => Action::Nothing,
        }
    }

    /// `msg` came from peer `msg.from` (already checked against its
    /// nonce) to rank `me` at `now`. A message claiming to be from `me`
    /// itself is no peer's and changes nothing.
    pub fn on_msg(&mut self, me: u16, msg: &Msg, now: u64) -> Action {
        let (qpn, psn) = (msg.qpn, msg.psn);
        if msg.from == me {
            return Action::Nothing;
        }
        match (msg.kind, *self) {
            (Kind::Req, State::Idle) => {
                *self = State::Answered {
                    since: now,
                    first: now,
                    qpn,
                };
                Action::ConnectAndAnswer { qpn, psn }
            }
            // Both asked: the lower rank's request wins.
            (Kind::Req, State::Asked { .. }) if me < msg.from => Action::Nothing,
            (Kind::Req, State::Asked { first, .. }) => {
                *self = State::Answered {
                    since: now,
                    first,
                    qpn,
                };
                Action::ConnectAndAnswer { qpn, psn }
            }
            // The answer was lost, or the asker has not seen it yet.
            (Kind::Req, State::Answered { qpn: q, .. }) if q == qpn => Action::Answer,
            // A late copy of the request this end answered.
            (Kind::Req, State::Ready { qpn: q }) if q == qpn => Action::Nothing,
            // Another queue pair asks: the peer restarted (unsupported).
            (Kind::Req, State::Answered { .. } | State::Ready { .. }) => {
                *self = State::Failed;
                Action::Restarted
            }
            (Kind::Rep, State::Asked { .. }) => {
                *self = State::Ready { qpn };
                Action::ConnectAndConfirm { qpn, psn }
            }
            // The confirmation was lost: the answerer asks again by answering.
            (Kind::Rep, State::Ready { qpn: q }) if q == qpn => Action::Confirm,
            (Kind::Rtu, State::Answered { qpn: q, .. }) if q == qpn => {
                *self = State::Ready { qpn };
                Action::Nothing
            }
            _ => Action::Nothing,
        }
    }

    /// Traffic came from the peer over the connection: whatever
    /// confirmation was lost, it is ready.
    pub fn heard(&mut self) {
        if let State::Answered { qpn, .. } = *self {
            *self = State::Ready { qpn };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heapless::Vec;

    /// Messages in flight to one end.
    type Wire = [Vec<Msg, 16>; 2];

    fn msg(kind: Kind, from: u16, qpn: u32) -> Msg {
        Msg {
            kind,
            from,
            nonce: 9,
            qpn,
            psn: 5,
        }
    }

    #[test]
    fn messages_round_trip_and_bad_bytes_are_typed_errors() {
        for kind in [Kind::Req, Kind::Rep, Kind::Rtu] {
            let m = Msg {
                kind,
                from: 65535,
                nonce: u32::MAX,
                qpn: MASK,
                psn: 0,
            };
            assert_eq!(Msg::decode(&m.encode()), Ok(m));
        }
        let b = msg(Kind::Req, 1, 2).encode();
        assert_eq!(Msg::decode(&b[..LEN - 1]), Err(MsgError::Short(LEN - 1)));
        let mut x = b;
        x[0] = 0;
        assert_eq!(Msg::decode(&x), Err(MsgError::Magic(0)));
        let mut x = b;
        x[1] = 4;
        assert_eq!(Msg::decode(&x), Err(MsgError::Kind(4)));
        let mut x = b;
        x[11] = 1;
        assert_eq!(Msg::decode(&x), Err(MsgError::Wide));
    }

    /// Two ends, each driven as the shell drives it, with a channel that
    /// drops or repeats what `lose` says: both end up ready, connected to
    /// each other's queue pair, whichever asked first.
    fn handshake(a_asks: bool, b_asks: bool, lose: &dyn Fn(usize) -> bool) -> (u32, u32) {
        let (mut sa, mut sb) = (State::Idle, State::Idle);
        // The queue pair each end connected to.
        let (mut ca, mut cb) = (0u32, 0u32);
        let mut wire: Wire = [Vec::new(), Vec::new()];
        let mut sent = 0usize;
        let mut now = 0u64;
        // Ends: 0 (rank 0, qpn 100) and 1 (rank 1, qpn 200).
        let send = |wire: &mut Wire, to: usize, m: Msg, sent: &mut usize| {
            *sent += 1;
            if !lose(*sent) {
                wire[to].push(m).expect("room in flight");
            }
        };
        let reply = |me: usize, a: Action, wire: &mut Wire, c: &mut u32, sent: &mut usize| {
            let qpn = [100, 200][me];
            let to = 1 - me;
            let from = me as u16;
            match a {
                Action::Nothing => {}
                Action::Restarted => panic!("no end restarts here"),
                Action::Ask => send(wire, to, msg(Kind::Req, from, qpn), sent),
                Action::ConnectAndAnswer { qpn: q, .. } => {
                    *c = q;
                    send(wire, to, msg(Kind::Rep, from, qpn), sent)
                }
                Action::Answer => send(wire, to, msg(Kind::Rep, from, qpn), sent),
                Action::ConnectAndConfirm { qpn: q, .. } => {
                    *c = q;
                    send(wire, to, msg(Kind::Rtu, from, qpn), sent)
                }
                Action::Confirm => send(wire, to, msg(Kind::Rtu, from, qpn), sent),
            }
        };
        for _ in 0..1000 {
            if matches!(sa, State::Ready { .. }) && matches!(sb, State::Ready { .. }) {
                return (ca, cb);
            }
            if a_asks && !matches!(sa, State::Ready { .. }) {
                let act = sa.want(now);
                reply(0, act, &mut wire, &mut ca, &mut sent);
            }
            if b_asks && !matches!(sb, State::Ready { .. }) {
                let act = sb.want(now);
                reply(1, act, &mut wire, &mut cb, &mut sent);
            }
            for m in core::mem::take(&mut wire[0]) {
                let act = sa.on_msg(0, &m, now);
                reply(0, act, &mut wire, &mut ca, &mut sent);
            }
            for m in core::mem::take(&mut wire[1]) {
                let act = sb.on_msg(1, &m, now);
                reply(1, act, &mut wire, &mut cb, &mut sent);
            }
            // An end that asked sends once ready; its peer hears it.
            if a_asks && matches!(sa, State::Ready { .. }) {
                sb.heard();
            }
            if b_asks && matches!(sb, State::Ready { .. }) {
                sa.heard();
            }
            now += RETRY_NS / 3;
        }
        panic!("no connection: {sa:?} {sb:?}");
    }

    #[test]
    fn either_end_or_both_asking_connect_each_to_the_other() {
        for (a, b) in [(true, false), (false, true), (true, true)] {
            assert_eq!(handshake(a, b, &|_| false), (200, 100), "{a} {b}");
        }
    }

    #[test]
    fn lost_messages_are_asked_or_answered_again() {
        for drop in 1..6 {
            for (a, b) in [(true, false), (false, true), (true, true)] {
                assert_eq!(
                    handshake(a, b, &|n| n == drop),
                    (200, 100),
                    "message {drop} lost, {a} {b}"
                );
            }
        }
        // Every other message lost.
        assert_eq!(handshake(true, true, &|n| n % 2 == 0), (200, 100));
    }

    #[test]
    fn an_answerer_that_hears_traffic_is_ready_without_the_confirmation() {
        let mut s = State::Idle;
        let a = s.on_msg(1, &msg(Kind::Req, 0, 7), 0);
        assert_eq!(a, Action::ConnectAndAnswer { qpn: 7, psn: 5 });
        s.heard();
        assert_eq!(s, State::Ready { qpn: 7 });
        // A late request from a peer already connected changes nothing.
        assert_eq!(s.on_msg(1, &msg(Kind::Req, 0, 7), 1), Action::Nothing);
    }

    #[test]
    fn a_silent_peer_is_given_up() {
        let mut s = State::Idle;
        assert_eq!(s.want(0), Action::Ask);
        assert_eq!(s.want(RETRY_NS - 1), Action::Nothing);
        assert_eq!(s.want(RETRY_NS), Action::Ask);
        assert_eq!(s.want(GIVE_UP_NS), Action::Nothing);
        assert_eq!(s, State::Failed);
    }

    /// A clock that went back: the request is repeated (before, `want`
    /// waited until the clock came back past the last request).
    #[test]
    fn a_clock_that_goes_back_still_retries() {
        let mut s = State::Idle;
        assert_eq!(s.want(5 * RETRY_NS), Action::Ask);
        assert_eq!(s.want(RETRY_NS), Action::Ask, "gone back");
        assert_eq!(s.want(RETRY_NS + 1), Action::Nothing);
        assert_eq!(s.want(2 * RETRY_NS), Action::Ask);
        assert_eq!(s.want(GIVE_UP_NS + RETRY_NS), Action::Nothing);
        assert_eq!(
            s,
            State::Failed,
            "given up counting from the clock's new time"
        );
    }

    /// A request that names the receiving rank itself is no peer's: it is
    /// not answered (before, it was, as if from a peer).
    #[test]
    fn a_request_from_this_rank_itself_changes_nothing() {
        let mut s = State::Idle;
        assert_eq!(s.on_msg(3, &msg(Kind::Req, 3, 7), 0), Action::Nothing);
        assert_eq!(s, State::Idle);
    }

    /// A peer that restarted asks from a new queue pair while this end is
    /// connected to its old one: unsupported, so the peer is failed at
    /// once (before, the request went unanswered for ever). A late copy of
    /// the request this end answered changes nothing.
    #[test]
    fn a_peer_that_restarts_with_a_new_queue_pair_is_failed() {
        for answered_only in [false, true] {
            let mut s = State::Idle;
            s.on_msg(1, &msg(Kind::Req, 0, 7), 0);
            if !answered_only {
                s.heard();
            }
            assert_eq!(s.on_msg(1, &msg(Kind::Req, 0, 7), 1), {
                if answered_only {
                    Action::Answer
                } else {
                    Action::Nothing
                }
            });
            assert_eq!(s.on_msg(1, &msg(Kind::Req, 0, 8), 2), Action::Restarted);
            assert_eq!(s, State::Failed);
        }
        // The asking end, connected, hears a request from a new queue pair.
        let mut s = State::Idle;
        s.want(0);
        s.on_msg(0, &msg(Kind::Rep, 1, 9), 1);
        assert_eq!(s, State::Ready { qpn: 9 });
        assert_eq!(s.on_msg(0, &msg(Kind::Rep, 1, 9), 2), Action::Confirm);
        assert_eq!(s.on_msg(0, &msg(Kind::Req, 1, 10), 3), Action::Restarted);
    }
}
