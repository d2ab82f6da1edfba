//! A collective carried out by a simulated rank: the core's [`Run`] says
//! each exchange and reduction; this posts the messages through the
//! rank's endpoint, waits without blocking (the job wakes the rank when
//! something arrives) and reduces at the model's cost.

use rmx_core::collective::{Buffer, Collective, Int, Op, Post, Run, Span, Step, CONTEXT};
use rmx_core::{Source, TagSel};

use crate::node::{Node, Req};

/// One rank's run of one collective, over `data` (contribution in,
/// result out), reducing as a sum of u32s.
pub struct CollTask {
    run: Run,
    pub data: Vec<u8>,
    scratch: Vec<u8>,
    /// Messages of the exchange under way not yet posted (the request
    /// table was full), receives first.
    to_post: Vec<(bool, Post)>,
    /// Posted: each request, and where a receive's bytes go.
    pending: Vec<(Req, Option<(Buffer, Span)>)>,
}

impl CollTask {
    /// Rank `node`'s run of `what` (its next collective) over `data`.
    pub fn new(
        node: &mut Node,
        ranks: u16,
        what: Collective,
        data: Vec<u8>,
    ) -> Result<CollTask, String> {
        let run = Run::new(what, ranks, node.me, node.collectives).map_err(|e| format!("{e:?}"))?;
        node.collectives = node.collectives.wrapping_add(1);
        if data.len() != run.plan().data_len() {
            return Err(format!(
                "{what:?}: {} bytes of data, the plan takes {}",
                data.len(),
                run.plan().data_len()
            ));
        }
        let scratch = vec![0; run.plan().scratch_len()];
        // Every rank takes part: the core watches each while the rounds
        // run, and the collective ends once any has failed (as the std
        // shell's does).
        node.watch_group(&format!("{what:?}"))?;
        Ok(CollTask {
            run,
            data,
            scratch,
            to_post: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// Moves the collective on as far as it goes now: `Ok(true)` once done.
    pub fn poll(&mut self, node: &mut Node) -> Result<bool, String> {
        let polled = self.rounds(node);
        node.watched("collective", false, polled)
    }

    fn rounds(&mut self, node: &mut Node) -> Result<bool, String> {
        loop {
            let mut moved = false;
            while let Some(&(recv, p)) = self.to_post.first() {
                let q = if recv {
                    let q = node.irecv(
                        Source::Rank(p.peer),
                        TagSel::Tag(p.tag),
                        CONTEXT,
                        p.span.len,
                    );
                    match q {
                        Ok(q) => (q, Some((p.buffer, p.span))),
                        Err(rmx_core::RecvError::RequestTableFull) => break,
                        Err(e) => {
                            return Err(format!("rank {}: collective receive: {e:?}", node.me))
                        }
                    }
                } else {
                    match node.isend(p.peer, p.tag, CONTEXT, &self.data[p.span.range()]) {
                        Ok(q) => (q, None),
                        Err(rmx_core::SendError::RequestTableFull) => break,
                        Err(e) => return Err(format!("rank {}: collective send: {e:?}", node.me)),
                    }
                };
                self.to_post.remove(0);
                self.pending.push(q);
                moved = true;
            }
            // Any that ended, so that their handles serve the posts left.
            let mut i = 0;
            while i < self.pending.len() {
                let (q, into) = &self.pending[i];
                let Some((st, bytes)) = node.test(q).map_err(|e| format!("{e:?}"))? else {
                    i += 1;
                    continue;
                };
                if let Some(f) = st.fault {
                    return Err(format!(
                        "rank {}: collective message from {}: {f:?}",
                        node.me, st.source
                    ));
                }
                if let Some((buffer, span)) = *into {
                    let to = match buffer {
                        Buffer::Data => &mut self.data,
                        Buffer::Scratch => &mut self.scratch,
                    };
                    if bytes.len() != span.len {
                        return Err(format!(
                            "rank {}: collective message of {} bytes, {} expected",
                            node.me,
                            bytes.len(),
                            span.len
                        ));
                    }
                    to[span.range()].copy_from_slice(&bytes);
                }
                self.pending.remove(i);
                moved = true;
            }
            if !self.to_post.is_empty() || !self.pending.is_empty() {
                if moved {
                    continue;
                }
                return Ok(false);
            }
            match self.run.step() {
                Step::Exchange { recvs, sends } => {
                    // Each receive, then the send of the same part: a
                    // table with room for two requests still moves (all
                    // receives first would fill it, every rank alike).
                    for (r, s) in recvs.into_iter().zip(sends) {
                        self.to_post.extend(r.map(|p| (true, p)));
                        self.to_post.extend(s.map(|p| (false, p)));
                    }
                }
                Step::Reduce { spans } => {
                    let bytes: usize = spans.iter().flatten().map(|s| s.len).sum();
                    node.spend(node.model().reduce_ns(bytes));
                    Run::reduce(spans, Op::Sum, Int::U32, &mut self.data, &self.scratch)
                        .map_err(|e| format!("{e:?}"))?;
                }
                Step::Done => return Ok(true),
            }
        }
    }
}
