//! A fence, carried out: the core's [`Epoch`] says each step (what to
//! send, sum, receive and wait for, in the window's design); this file
//! does it with the rank's messages and collectives and hands the results
//! back. The bytes every request names live in [`Io`] and the window's
//! [`Inbox`] until the fence has waited for them. Whenever a wait of the
//! fence stalls, the operations aimed at this rank are received meanwhile
//! ([`inbox::drain`]): an epoch may hold more of them than the receive
//! pool.

use rmx_core::onesided::{
    channel::{FINISH, FLAG},
    tag, Epoch, Outcome, Reduction, Step, Target,
};
use rmx_core::{RecvFault, Source, TagSel};

use super::inbox::{self, Inbox};
use super::io::Io;
use super::messages::{recv_failed, send_failed};
use super::{deferred, immediate, Win, WinError, RMA_CONTEXT};
use crate::rank::{Rank, Req};
use crate::transport::Transport;
use rmx_driver::task::CollectiveError;

/// Ends the epoch of `w` (and opens the next) as the core's steps say.
pub(super) fn run<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    no_precede: bool,
    no_succeed: bool,
) -> Result<(), WinError> {
    let (epoch, gets) = w.epoch(r, |e, _| {
        let started = e.fence(no_precede, no_succeed);
        started.map(|()| (e.epoch(), e.gets()))
    })?;
    let mut io = std::mem::take(&mut w.io);
    let mut inbox = std::mem::take(&mut w.inbox);
    let mut counts = std::mem::take(&mut io.counts);
    // A fence is collective: every rank is watched while it runs, and its
    // waits for any origin end once the group lost a rank.
    let steps = match r.group_intact() {
        true => {
            r.watch_all(true);
            // SAFETY: every buffer a request names lives in `io` and
            // `inbox` until the requests are waited for or abandoned below.
            let s = unsafe { steps(w, r, epoch, &mut io, &mut inbox, &mut counts) };
            r.watch_all(false);
            s
        }
        false => Err(inbox::group_lost()),
    };
    io.counts = counts;
    let end = |w: &mut Win, io: &mut Io| {
        match w.design.immediate() {
            true => immediate::end_epoch(w, gets),
            false => deferred::end_epoch(w, gets, io),
        }
        w.got_epoch = w.epochs;
        w.epochs += 1;
    };
    let done = match steps {
        Ok((outcome, fault)) => {
            end(w, &mut io);
            if let Some(f) = fault {
                Err(WinError::Collective(CollectiveError::Failed(f)))
            } else if outcome.false_assertion {
                Err(WinError::Assertion)
            } else if outcome.failed > 0 {
                Err(WinError::Transfer {
                    failed: outcome.failed.into(),
                })
            } else if outcome.disagree {
                Err(WinError::Disagree)
            } else {
                Ok(())
            }
        }
        Err(e) => {
            let left: Vec<Req> = io
                .pending
                .drain(..)
                .chain(io.flag_recvs.drain(..))
                .chain(io.reply_recvs.drain(..))
                .chain(inbox.requests())
                .collect();
            r.abandon(left);
            w.epoch(r, |e, _| e.abort());
            end(w, &mut io);
            Err(e)
        }
    };
    // Every request is done (waited for, or abandoned above).
    io.clear();
    inbox.clear();
    w.io = io;
    w.inbox = inbox;
    done
}

/// Carries out the steps until the core says the fence is done; the
/// first fault of a request the fence waited for.
///
/// # Safety
/// `io` and `inbox` stay in place, untouched, until every request in
/// them completed.
unsafe fn steps<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
    inbox: &mut Inbox,
    counts: &mut Vec<u8>,
) -> Result<(Outcome, Option<RecvFault>), WinError> {
    let id = w.id;
    let n = r.size() as usize;
    counts.clear();
    counts.resize(Epoch::<Vec<Target>>::reduce_len(w.design, n), 0);
    let mut fault = None;
    // What the last step brought back: handed to the core with the next.
    let mut input = Input::Nothing;
    loop {
        let step = w.epoch(r, |e, _| {
            match input {
                Input::Nothing => {}
                Input::Reduced(len) => e.reduced(&counts[..len]),
                Input::Finished(src, body) => e.finished(src, body),
                Input::Arrived(from) => e.arrived(from),
            }
            e.step(counts)
        });
        input = Input::Nothing;
        // What a stalled wait does meanwhile (the caller's contract keeps
        // the inbox).
        macro_rules! beside {
            () => {
                &mut |r: &mut Rank<T>| {
                    if !r.group_intact() {
                        return Err(inbox::group_lost());
                    }
                    // SAFETY: the caller's contract keeps the inbox.
                    unsafe { inbox::drain(w, r, inbox) }
                }
            };
        }
        match step {
            Step::SendQueued => {
                // SAFETY: the caller's contract.
                let sent = unsafe { deferred::send_queued(w, r, epoch, io, inbox) };
                fault = fault.or(sent?);
            }
            Step::Flush => {
                let flushed = immediate::flush(w, r, &mut |w, r| {
                    // SAFETY: the caller's contract keeps the inbox.
                    unsafe { inbox::drain(w, r, inbox) }
                });
                fault = fault.or(flushed?);
            }
            Step::Reduce { collective, len } => {
                let scatter = collective == Reduction::ReduceScatter;
                r.sum_beside(&mut counts[..len], scatter, beside!())?;
                input = Input::Reduced(len);
            }
            Step::SendFinish { to, body } => {
                if io.bodies.is_empty() {
                    io.bodies.reserve_exact(n);
                }
                assert!(
                    io.bodies.len() < io.bodies.capacity(),
                    "one finish per rank"
                );
                io.bodies.push(body);
                let b = io.bodies.last().expect("just pushed");
                let t = tag(id, epoch, FINISH);
                // SAFETY: the body stays in place in `io` (its vector never
                // grows past what was reserved).
                let q = unsafe { r.isend_in(to, t, RMA_CONTEXT, b.as_ptr(), 4) };
                io.pending.push(q.map_err(send_failed)?);
            }
            Step::RecvFinish => {
                let mut b = [0u8; 4];
                let sel = TagSel::Tag(tag(id, epoch, FINISH));
                // SAFETY: waited for, or abandoned, before `b` goes.
                let q = unsafe { r.irecv_in(Source::Any, sel, RMA_CONTEXT, b.as_mut_ptr(), 4) }
                    .map_err(recv_failed)?;
                match r.wait_beside(q, beside!()) {
                    Ok(st) => input = Input::Finished(st.source, b),
                    Err((q, e)) => {
                        r.abandon([q]);
                        return Err(e);
                    }
                }
            }
            // Only immediates satisfy the core without a message: where
            // none can come, the operation is simply received.
            Step::Await {
                immediates: false, ..
            } => {
                // SAFETY: the caller's contract.
                let from = unsafe { inbox::next(w, r, epoch, inbox)? };
                input = Input::Arrived(from);
            }
            Step::Await {
                immediates: true, ..
            } => {
                // SAFETY: the caller's contract.
                if let Some(from) = unsafe { inbox::next_unless_satisfied(w, r, epoch, inbox)? } {
                    input = Input::Arrived(from);
                }
            }
            // SAFETY: the caller's contract.
            Step::ExpectFlags => unsafe { expect_flags(w, r, epoch, io)? },
            Step::Flags => {
                fault = fault.or(r.wait_all(io.pending.drain(..)));
                // SAFETY: the caller's contract.
                fault = fault.or(unsafe { send_flags(w, r, epoch, io)? });
            }
            Step::DropFlags => {
                let recvs: Vec<Req> = io.flag_recvs.drain(..).collect();
                for q in &recvs {
                    r.cancel(q);
                }
                // Cancelled, or (a rank that did not close after all) a
                // flag that came: either ends them.
                r.wait_all(recvs);
            }
            Step::Barrier => {
                fault = fault.or(r.wait_all(io.pending.drain(..)));
                r.barrier()?;
            }
            Step::Done(outcome) => {
                fault = fault.or(inbox::close(w, r, epoch, inbox, false)?);
                fault = fault.or(r.wait_all(io.pending.drain(..)));
                fault = fault.or(r.wait_all(io.reply_recvs.drain(..)));
                return Ok((outcome, fault));
            }
        }
    }
}

/// What a step brought back for the core.
#[derive(Clone, Copy)]
enum Input {
    Nothing,
    Reduced(usize),
    Finished(u16, [u8; 4]),
    /// An operation from this rank.
    Arrived(u16),
}

/// Naive, before anything else of its fence: a receive for every other
/// rank's flag, so no flag waits as an unexpected message holding credit
/// a finish message needs. A fence that fails abandons them with the
/// rest of its requests.
///
/// # Safety
/// As [`steps`].
unsafe fn expect_flags<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
) -> Result<(), WinError> {
    let n = r.size() as usize;
    io.flags.clear();
    io.flags.resize(n, 0);
    let t = tag(w.id, epoch, FLAG);
    for p in (0..r.size()).filter(|&p| p != w.me) {
        // SAFETY: `io.flags` is never resized while its receives run (the
        // caller's contract keeps `io` in place).
        let q = unsafe {
            r.irecv_in(
                Source::Rank(p),
                TagSel::Tag(t),
                RMA_CONTEXT,
                io.flags[p as usize..].as_mut_ptr(),
                1,
            )
        };
        io.flag_recvs.push(q.map_err(recv_failed)?);
    }
    Ok(())
}

/// Naive's opening: a flag to every other rank, then every flag's receive
/// [`expect_flags`] posted; the first fault among them.
///
/// # Safety
/// As [`steps`].
unsafe fn send_flags<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
) -> Result<Option<RecvFault>, WinError> {
    let t = tag(w.id, epoch, FLAG);
    let mut sends = Vec::new();
    for p in (0..r.size()).filter(|&p| p != w.me) {
        // SAFETY: `io.flag` stays in place (the caller's contract).
        let q = unsafe { r.isend_in(p, t, RMA_CONTEXT, io.flag.as_ptr(), 1) };
        match q {
            Ok(q) => sends.push(q),
            Err(e) => {
                r.abandon(sends);
                return Err(send_failed(e));
            }
        }
    }
    let recvs: Vec<Req> = io.flag_recvs.drain(..).collect();
    Ok(r.wait_all(sends.into_iter().chain(recvs)))
}
