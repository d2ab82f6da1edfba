//! The copy engine's choice as `rmx calibrate` saves it: one row per size
//! class, the routine picked and every routine's measured rate, read back
//! when the engine starts.

use crate::reuse::CopyRow;

use super::{class_size, Routine, Table, CLASSES};

/// Rows for the engine's measured `table`.
pub fn rows(table: &Table) -> Vec<CopyRow> {
    let best = table.best();
    (0..CLASSES)
        .map(|c| CopyRow {
            size: class_size(c) as u64,
            routine: best[c].name().to_string(),
            mb_per_s: table
                .routines
                .iter()
                .zip(&table.gbps[c])
                .map(|(r, g)| (r.name().to_string(), (g * 1000.0).round() as u32))
                .collect(),
        })
        .collect()
}

/// The saved routine of every class, if `rows` has them all (files of
/// older versions have none).
pub fn choice(rows: &[CopyRow]) -> Option<[Routine; CLASSES]> {
    if rows.len() != CLASSES {
        return None;
    }
    let mut out = [Routine::Memcpy; CLASSES];
    for (c, row) in rows.iter().enumerate() {
        if row.size != class_size(c) as u64 {
            return None;
        }
        out[c] = Routine::from_name(&row.routine)?;
    }
    Some(out)
}
