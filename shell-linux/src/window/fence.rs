//! A fence, carried out: the core's [`Epoch`] says each step (what to
//! send, sum, receive and wait for, in the window's design); this file
//! does it with the rank's messages and collectives and hands the results
//! back. The bytes every request names live in [`Io`] until the fence
//! has waited for them.

use rmx_core::collective::{Int, Op};
use rmx_core::onesided::{
    channel::{FINISH, FLAG},
    tag, Epoch, Outcome, Reduction, Step, Target,
};
use rmx_core::{RecvFault, Source, TagSel};

use super::messages::{self, recv_failed, send_failed, Outgoing};
use super::{deferred, epoch_of, immediate, Win, WinError, RMA_CONTEXT};
use crate::collective::CollectiveError;
use crate::rank::{Rank, Req};
use crate::transport::Transport;

/// The buffers of one fence's requests, and the requests.
#[derive(Default)]
pub(super) struct Io {
    pub pending: Vec<Req>,
    /// Operations sent (deferred design).
    pub outgoing: Vec<Outgoing>,
    /// Finish messages' bodies: at most one per rank, so the vector,
    /// reserved for all of them before the first is sent, never moves
    /// what a request reads.
    bodies: Vec<[u8; 4]>,
    /// Answers to gets, and replies to this rank's gets with their numbers.
    pub answers: Vec<Vec<u8>>,
    pub replies: Vec<(u32, Vec<u8>)>,
    /// Naive: the flag every other rank sends, received here (one byte a
    /// rank, allocated once before the receives are posted), the
    /// receives, and the one byte every flag sent carries.
    flags: Vec<u8>,
    flag_recvs: Vec<Req>,
    flag: [u8; 1],
}

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
    let mut io = Io::default();
    // SAFETY: every buffer a request names lives in `io` until the
    // requests are waited for or abandoned below.
    let steps = unsafe { steps(w, r, epoch, &mut io) };
    let end = |w: &mut Win, io: &mut Io| match w.design.immediate() {
        true => immediate::end_epoch(w, gets),
        false => deferred::end_epoch(w, gets, io),
    };
    match steps {
        Ok((outcome, fault)) => {
            end(w, &mut io);
            if let Some(f) = fault {
                return Err(WinError::Collective(CollectiveError::Failed(f)));
            }
            if outcome.failed > 0 {
                return Err(WinError::Transfer {
                    failed: outcome.failed.into(),
                });
            }
            if outcome.disagree {
                return Err(WinError::Disagree);
            }
            Ok(())
        }
        Err(e) => {
            r.abandon(io.pending.drain(..).chain(io.flag_recvs.drain(..)));
            w.epoch(r, |e, _| e.abort());
            end(w, &mut io);
            Err(e)
        }
    }
}

/// Carries out the steps until the core says the fence is done; the
/// first fault of a request the fence waited for.
///
/// # Safety
/// `io` stays in place, untouched, until every request on `io.pending`
/// completed.
unsafe fn steps<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
) -> Result<(Outcome, Option<RecvFault>), WinError> {
    let id = w.id;
    let n = r.size() as usize;
    let mut counts = vec![0u8; Epoch::<Vec<Target>>::reduce_len(w.design, n)];
    let mut fault = None;
    // What the last step brought back: handed to the core with the next.
    let mut input = Input::Nothing;
    loop {
        let step = w.epoch(r, |e, _| {
            match input {
                Input::Nothing => {}
                Input::Reduced(len) => e.reduced(&counts[..len]),
                Input::Finished(src, body) => e.finished(src, body),
                Input::Arrived => e.arrived(),
            }
            e.step(&mut counts)
        });
        input = Input::Nothing;
        match step {
            // SAFETY: the caller's contract.
            Step::SendQueued => unsafe { deferred::send_queued(w, r, epoch, io)? },
            Step::Flush => fault = fault.or(immediate::flush(w, r)),
            Step::Reduce { collective, len } => {
                let v = &mut counts[..len];
                match collective {
                    Reduction::ReduceScatter => r.reduce_scatter(v, Int::U32, Op::Sum)?,
                    Reduction::Allreduce => r.allreduce(v, Int::U32, Op::Sum)?,
                }
                input = Input::Reduced(len);
            }
            Step::SendFinish { to, body } => {
                if io.bodies.capacity() == 0 {
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
                let st = r
                    .recv_in(Source::Any, sel, RMA_CONTEXT, &mut b)
                    .map_err(recv_failed)?;
                input = Input::Finished(st.source, b);
            }
            // Only immediates satisfy the core without a message: where
            // none can come, the operation is simply received.
            Step::Await {
                from,
                immediates: false,
            } => {
                let src = from.map_or(Source::Any, Source::Rank);
                let a = messages::recv(w, r, epoch, src)?;
                // SAFETY: the caller's contract.
                unsafe { deferred::take(w, r, epoch, a, io)? };
                input = Input::Arrived;
            }
            Step::Await {
                immediates: true, ..
            } => {
                // SAFETY: the caller's contract.
                if unsafe { await_any(w, r, epoch, io)? } {
                    input = Input::Arrived;
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
                fault = fault.or(r.wait_all(io.pending.drain(..)));
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
    Arrived,
}

/// Receives one operation from any rank, unless the core is satisfied
/// first (the rest came as immediates): then the receive is cancelled.
/// Whether an operation the core awaited arrived.
///
/// # Safety
/// As [`steps`].
unsafe fn await_any<T: Transport + 'static>(
    w: &mut Win,
    r: &mut Rank<T>,
    epoch: u16,
    io: &mut Io,
) -> Result<bool, WinError> {
    let id = w.id;
    let mut first: Box<messages::First> =
        Box::new([0u8; rmx_core::onesided::HEADER + rmx_core::onesided::INLINE]);
    // SAFETY: `first` is on the heap and kept until this request
    // completes or is cancelled and waited for below.
    let q = unsafe { messages::post(w.id, r, epoch, Source::Any, &mut first)? };
    match r.wait_or(q, |d| epoch_of(&mut d.windows, id).satisfied()) {
        Ok(st) => {
            let a = messages::finish(w, r, epoch, st, &first)?;
            // SAFETY: the caller's contract.
            unsafe { deferred::take(w, r, epoch, a, io)? };
            Ok(true)
        }
        Err(q) => {
            let cancelled = r.cancel(&q);
            let st = r.wait(q);
            if !cancelled {
                // A message nobody counted (a faulty or hostile origin).
                messages::finish(w, r, epoch, st, &first)?;
                w.epoch(r, |e, _| e.refuse());
            }
            Ok(false)
        }
    }
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
    io.flags = vec![0u8; n];
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
