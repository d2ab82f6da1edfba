//! The binned matcher against the plain ordered lists, on random sequences
//! over many sources with few bins (so bins are shared by several sources
//! and contexts), with ANY_SOURCE and ANY_TAG on both sides: every arrival,
//! receive and cancel must pick the same entry.

use proptest::prelude::*;
use rmx_core::matching::{Envelope, Pattern, Source, TagSel};
use rmx_proptest::heap::{matcher, HeapMatcher};
use rmx_proptest::linear::LinearMatcher;

#[derive(Clone, Copy, Debug)]
enum Op {
    Arrive(Envelope),
    Post(Pattern),
    Cancel(u32),
    /// A peer failed: every receive naming it goes.
    Fail(u16),
    /// No peer is left: every ANY_SOURCE receive goes.
    FailAny,
}

fn op() -> impl Strategy<Value = Op> {
    let env =
        (0u16..40, 0u32..3, 0u16..3).prop_map(|(src, tag, context)| Envelope { src, tag, context });
    let pat = (
        proptest::option::of(0u16..40),
        proptest::option::of(0u32..3),
        0u16..3,
    )
        .prop_map(|(s, t, context)| Pattern {
            source: s.map_or(Source::Any, Source::Rank),
            tag: t.map_or(TagSel::Any, TagSel::Tag),
            context,
        });
    prop_oneof![
        4 => env.prop_map(Op::Arrive),
        4 => pat.prop_map(Op::Post),
        1 => (0u32..200).prop_map(Op::Cancel),
        1 => (0u16..40).prop_map(Op::Fail),
        1 => Just(Op::FailAny),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn bins_match_like_ordered_lists(ops in proptest::collection::vec(op(), 1..400)) {
        // 16 entries, so 16 bins for 40 sources × 3 contexts: bins are shared.
        let mut m: HeapMatcher<u32, u32> = matcher(16, 16);
        let mut model: LinearMatcher<u32, u32> = LinearMatcher::default();
        for (id, op) in ops.into_iter().enumerate() {
            let id = id as u32;
            match op {
                Op::Arrive(env) => {
                    let got = m.arrive(&env);
                    prop_assert_eq!(got, model.arrive(&env), "arrival {} {:?}", id, env);
                    if got.is_none() {
                        let full = m.unexpected_full();
                        prop_assert_eq!(m.push_unexpected(env, id).is_err(), full);
                        if !full {
                            model.push_unexpected(env, id);
                        }
                    }
                }
                Op::Post(pat) => {
                    let got = m.take_unexpected(&pat);
                    prop_assert_eq!(got, model.take_unexpected(&pat), "receive {} {:?}", id, pat);
                    if got.is_none() {
                        let full = m.posted_full();
                        prop_assert_eq!(m.post(pat, id).is_err(), full);
                        if !full {
                            model.post(pat, id);
                        }
                    }
                }
                Op::Cancel(k) => {
                    prop_assert_eq!(m.remove_posted(|&p| p == k), model.remove_posted(|&p| p == k));
                }
                // Each removed receive fails on its own: which ones go
                // matters, not in what order.
                Op::Fail(src) => {
                    let mut got: Vec<_> = std::iter::from_fn(|| m.remove_posted_from(src)).collect();
                    let mut want: Vec<_> =
                        std::iter::from_fn(|| model.remove_posted_from(src)).collect();
                    got.sort_unstable();
                    want.sort_unstable();
                    prop_assert_eq!(got, want, "fail {}", src);
                }
                Op::FailAny => {
                    let got: Vec<_> = std::iter::from_fn(|| m.remove_posted_any()).collect();
                    let want: Vec<_> = std::iter::from_fn(|| model.remove_posted_any()).collect();
                    prop_assert_eq!(got, want);
                }
            }
            prop_assert_eq!(m.lens(), model.lens());
        }
    }
}

/// A receive for one source skips every other source's entries: with 4096
/// receives posted for other sources, the arrival still finds its own.
#[test]
fn an_arrival_finds_its_source_among_thousands_posted_for_others() {
    let mut m: HeapMatcher<u32, u32> = matcher(4096, 16);
    for i in 0..4095u32 {
        let pat = Pattern {
            source: Source::Rank((i % 1023) as u16 + 1),
            tag: TagSel::Tag(i),
            context: 0,
        };
        m.post(pat, i).unwrap();
    }
    let mine = Pattern {
        source: Source::Rank(0),
        tag: TagSel::Any,
        context: 0,
    };
    m.post(mine, 9999).unwrap();
    assert!(m.posted_full());
    let env = Envelope {
        src: 0,
        tag: 5,
        context: 0,
    };
    assert_eq!(m.arrive(&env), Some(9999));
    assert_eq!(m.lens(), (4095, 0));
}
