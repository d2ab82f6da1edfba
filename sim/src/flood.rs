//! Point-to-point floods between a job's steps: ranks send a peer more
//! messages than its receive pool holds and go on (to a collective, say)
//! without waiting; a later step has the peer receive them all and the
//! senders wait for their sends. The flood's messages must not keep the
//! steps between from finishing: a correct MPI program.

use rmx_core::{Source, TagSel};

use crate::node::Node;
use crate::req::Req;

/// The context of the floods' messages: the application's.
const CONTEXT: u16 = rmx_core::wire::context::USER;

/// A flood message's bytes: its origin and its number in the origin's
/// messages to that target, so the receiver can check order.
fn body(origin: u16, k: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..2].copy_from_slice(&origin.to_le_bytes());
    b[4..].copy_from_slice(&k.to_le_bytes());
    b
}

/// Sends `count` messages from `node` to `to` (tags `k`, numbered from
/// `first`), keeping the requests in `sends`.
pub fn send(
    node: &mut Node,
    to: u16,
    first: u32,
    count: u32,
    sends: &mut Vec<Req>,
) -> Result<(), String> {
    for k in first..first + count {
        let q = node
            .isend(to, k, CONTEXT, &body(node.me, k))
            .map_err(|e| format!("rank {}: flood send {k}: {e:?}", node.me))?;
        sends.push(q);
    }
    Ok(())
}

/// One rank's side of a drain: as the target, receive what each origin
/// sent it since the last drain; as an origin, wait for its sends.
pub struct DrainTask {
    recvs: Vec<Req>,
    sends: Vec<Req>,
    /// The next number each origin's messages must carry.
    next: Vec<u32>,
    last: Vec<u32>,
}

impl DrainTask {
    /// `from[o]`: the numbers `o`'s messages to this rank carry, first and
    /// past the last; `any_source`: receive them with wildcards.
    pub fn new(
        node: &mut Node,
        from: Vec<(u32, u32)>,
        any_source: bool,
        sends: Vec<Req>,
    ) -> Result<DrainTask, String> {
        let mut recvs = Vec::new();
        for (o, &(a, b)) in from.iter().enumerate() {
            for _ in a..b {
                let src = match any_source {
                    true => Source::Any,
                    false => Source::Rank(o as u16),
                };
                let q = node
                    .irecv(src, TagSel::Any, CONTEXT, 8)
                    .map_err(|e| format!("rank {}: flood receive: {e:?}", node.me))?;
                recvs.push(q);
            }
        }
        Ok(DrainTask {
            recvs,
            sends,
            next: from.iter().map(|&(a, _)| a).collect(),
            last: from.iter().map(|&(_, b)| b).collect(),
        })
    }

    /// `Ok(true)` once every message arrived, in order, and every send ended.
    pub fn poll(&mut self, node: &mut Node) -> Result<bool, String> {
        while let Some(q) = self.sends.first() {
            match node.test(q).map_err(|e| format!("{e:?}"))? {
                None => return Ok(false),
                Some((st, _)) if st.fault.is_some() => {
                    return Err(format!("rank {}: flood send ended {st:?}", node.me))
                }
                Some(_) => {
                    self.sends.remove(0);
                }
            }
        }
        while let Some(q) = self.recvs.first() {
            let Some((st, bytes)) = node.test(q).map_err(|e| format!("{e:?}"))? else {
                return Ok(false);
            };
            self.recvs.remove(0);
            let o = st.source as usize;
            let next = self.next.get(o).filter(|&&k| k < self.last[o]);
            let want = next.map(|&k| body(st.source, k));
            if st.fault.is_some() || want.is_none_or(|w| bytes != w) {
                return Err(format!(
                    "rank {}: flood message {st:?} {bytes:?}, wanted {want:?}",
                    node.me
                ));
            }
            self.next[o] += 1;
        }
        Ok(true)
    }
}
