//! Communicators: a group of the job's ranks, this process's place in
//! it, and the two communication contexts that keep its messages apart
//! from every other communicator's (point-to-point, and its collectives').

use std::sync::Arc;

use crate::abi::*;
use crate::error::{Error, Handler, Result};

/// The job's ranks a communicator holds, by their rank in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Group {
    /// Every rank, in the job's order (`MPI_COMM_WORLD` and its copies).
    World(u16),
    /// These job ranks, in this order.
    List(Vec<u16>),
}

impl Group {
    pub fn size(&self) -> u16 {
        match self {
            Group::World(n) => *n,
            Group::List(v) => v.len() as u16,
        }
    }

    /// The job rank of member `i` (< size).
    pub fn job_rank(&self, i: u16) -> u16 {
        match self {
            Group::World(_) => i,
            Group::List(v) => v[i as usize],
        }
    }

    /// The member that job rank `r` is, if it is one.
    pub fn member(&self, r: u16) -> Option<u16> {
        match self {
            Group::World(n) => (r < *n).then_some(r),
            Group::List(v) => v.iter().position(|&x| x == r).map(|i| i as u16),
        }
    }

    /// The same ranks in the same order (`MPI_Comm_compare`'s congruence).
    pub fn same(&self, o: &Group) -> bool {
        let n = self.size();
        n == o.size() && (0..n).all(|i| self.job_rank(i) == o.job_rank(i))
    }
}

/// The most communicators a job's rank can take part in over its life
/// (each holds two of the core's 16-bit contexts, below rmx's own).
pub const MAX_IDS: u16 = 0x6000;

const _: () = assert!(2 * MAX_IDS + 1 < rmx_core::wire::context::COLLECTIVE);

/// One communicator.
#[derive(Debug)]
pub struct Comm {
    pub group: Arc<Group>,
    /// This rank's place in the group.
    pub me: u16,
    /// Its identity, agreed by every member when it was made; its
    /// point-to-point context is `2 * id`, its collectives' `2 * id + 1`.
    pub id: u16,
    pub handler: Handler,
    /// Collectives started on it so far: the tag of the next one's messages.
    pub colls: u32,
}

impl Comm {
    pub fn new(group: Group, me: u16, id: u16) -> Comm {
        Comm {
            group: Arc::new(group),
            me,
            id,
            handler: Handler::Fatal,
            colls: 0,
        }
    }

    pub fn size(&self) -> u16 {
        self.group.size()
    }

    pub fn p2p_context(&self) -> u16 {
        2 * self.id
    }

    pub fn coll_context(&self) -> u16 {
        2 * self.id + 1
    }

    /// The job rank of `rank` of this communicator (a checked argument).
    pub fn peer(&self, rank: i32) -> Result<u16> {
        u16::try_from(rank)
            .ok()
            .filter(|&r| r < self.size())
            .map(|r| self.group.job_rank(r))
            .ok_or_else(|| {
                Error::new(
                    MPI_ERR_RANK,
                    format!("rank {rank} is not in this communicator of {}", self.size()),
                )
            })
    }

    /// A root argument of a collective, checked.
    pub fn root(&self, root: i32) -> Result<u16> {
        u16::try_from(root)
            .ok()
            .filter(|&r| r < self.size())
            .ok_or_else(|| {
                Error::new(
                    MPI_ERR_ROOT,
                    format!("root {root} is not in this communicator of {}", self.size()),
                )
            })
    }

    /// The tag of the next collective's messages.
    pub fn next_coll(&mut self) -> u32 {
        let t = self.colls;
        self.colls = self.colls.wrapping_add(1);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_map_both_ways_and_compare() {
        let g = Group::List(vec![3, 1, 2]);
        assert_eq!(g.job_rank(0), 3);
        assert_eq!(g.member(2), Some(2));
        assert_eq!(g.member(0), None);
        assert!(Group::World(3).same(&Group::List(vec![0, 1, 2])));
        assert!(!g.same(&Group::World(3)));
        let c = Comm::new(g, 1, 7);
        assert_eq!(c.peer(0), Ok(3));
        assert_eq!(c.peer(3).unwrap_err().class, MPI_ERR_RANK);
        assert_eq!(c.peer(-1).unwrap_err().class, MPI_ERR_RANK);
        assert_eq!(c.root(5).unwrap_err().class, MPI_ERR_ROOT);
        assert_eq!((c.p2p_context(), c.coll_context()), (14, 15));
    }
}
