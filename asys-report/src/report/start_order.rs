//! A table's rows in the order of a key that starts with a time (a stable
//! sort by start), without holding the table.
//!
//! The recorder writes a call or a device activity when it ends, so a table
//! is in about end order, and putting it in start order means holding back
//! every row that started earlier but ended later. Holding the whole table
//! (as the API trace once did: 4.3 GB for 5 M calls) is not needed: rows
//! go through a buffer a chunk of `held` rows at a time; after each
//! chunk the buffer is sorted (two sorted runs, mostly: what was held and
//! the chunk) and all but its last `held` rows go out. A row whose key is
//! below one already sent out (a long call, such as a synchronize, ending
//! after many short ones) cannot go through the buffer: it is a straggler.
//! So there are three passes:
//! 1. the keys alone (a column or two) go through the same buffer, which
//!    finds the stragglers;
//! 2. only when there are any, the stragglers' rows are read and sorted;
//! 3. the rows go through the buffer again (the stragglers counted in their
//!    chunks but left out), and the stragglers are merged in where they
//!    belong.
//!
//! Memory is the buffer and the stragglers, whatever the table's length; the
//! order is exactly that of sorting the whole table by key, with ties (equal
//! keys) in table order, since every key ends with the row's number.
use std::collections::VecDeque;

use super::ReportError;

/// Rows the buffer holds back after each chunk by default, and the rows of
/// a chunk (each as large as its item): the buffer holds at most twice this.
pub const HELD: usize = 1 << 16;

/// Batches of a table's items (or keys), in table order.
pub type Batches<'a, T> = Box<dyn Iterator<Item = Result<Vec<T>, ReportError>> + Send + 'a>;

/// A table read in key order.
pub trait Ordered {
    /// The order: a time first, the row's number in the table last.
    type Key: Ord + Copy + Send;
    type Item: Send;

    fn key(item: &Self::Item) -> Self::Key;
    /// The row number `key` ends with.
    fn row(key: &Self::Key) -> u64;
    /// Every row's key (pass 1: only the key's columns need decoding), rows
    /// numbered from 0 in table order.
    fn keys(&self) -> Result<Batches<'_, Self::Key>, ReportError>;
    /// Every row's item, numbered as in [`Self::keys`]. `only`: the rows
    /// wanted (sorted); the others may be left out.
    fn items(&self, only: Option<&[u64]>) -> Result<Batches<'_, Self::Item>, ReportError>;
    /// The table, for the error a table that changed between passes gives.
    fn path(&self) -> std::path::PathBuf;
}

/// Numbers a table's rows from 0 across its batches, for [`Ordered::keys`]
/// and [`Ordered::items`], and picks the rows `only` names (sorted), or all.
pub struct Numbering {
    row: u64,
    only: Option<Vec<u64>>,
    next: usize,
}

impl Numbering {
    pub fn new(only: Option<&[u64]>) -> Self {
        Self {
            row: 0,
            only: only.map(<[u64]>::to_vec),
            next: 0,
        }
    }

    /// The next batch, of `n` rows: its first row's number, and the indices
    /// in it of the rows wanted.
    pub fn pick(&mut self, n: usize) -> (u64, Picked) {
        let first = self.row;
        self.row += n as u64;
        let Some(rows) = &self.only else {
            return (first, Picked::All(0..n));
        };
        let mut picked = Vec::new();
        while let Some(&r) = rows.get(self.next).filter(|&&r| r < self.row) {
            picked.push((r - first) as usize);
            self.next += 1;
        }
        (first, Picked::These(picked.into_iter()))
    }
}

/// The indices [`Numbering::pick`] gives.
pub enum Picked {
    All(std::ops::Range<usize>),
    These(std::vec::IntoIter<usize>),
}

impl Iterator for Picked {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            Self::All(r) => r.next(),
            Self::These(v) => v.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::All(r) => r.size_hint(),
            Self::These(v) => v.size_hint(),
        }
    }
}

impl ExactSizeIterator for Picked {}

/// Every item of `table` in key order (the three passes; see the module).
pub fn in_order<T: Ordered>(
    table: &T,
    held: usize,
) -> Result<impl Iterator<Item = Result<T::Item, ReportError>> + Send + '_, ReportError> {
    let mut order = Order::<T::Key, ()>::new(held, held);
    let mut straggler_keys = Vec::new();
    for b in table.keys()? {
        for key in b? {
            if order.take(key, ()).is_err() {
                straggler_keys.push(key);
            }
            // Only which rows are stragglers matters here.
            order.out.clear();
        }
    }
    let mut stragglers = Vec::with_capacity(straggler_keys.len());
    if !straggler_keys.is_empty() {
        let rows: Vec<u64> = straggler_keys.iter().map(T::row).collect();
        // Items come in table order, as the stragglers were found; keys are
        // unique (each ends with its row).
        let mut wanted = straggler_keys.iter().peekable();
        for b in table.items(Some(&rows))? {
            for item in b? {
                let k = T::key(&item);
                if wanted.peek() == Some(&&k) {
                    stragglers.push(Keyed(k, item));
                    wanted.next();
                }
            }
        }
        stragglers.sort_unstable();
    }
    let path = table.path();
    let mut merge = Merge::<T> {
        batches: table.items(None)?,
        order: Order::new(held, held),
        straggler_keys: straggler_keys.into(),
        stragglers: stragglers.into(),
        ready: VecDeque::new(),
        drained: false,
        path,
    };
    Ok(std::iter::from_fn(move || merge.next()))
}

/// An item with its key, ordered by the key alone.
struct Keyed<K, T>(K, T);

impl<K: Ord, T> PartialEq for Keyed<K, T> {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
impl<K: Ord, T> Eq for Keyed<K, T> {}
impl<K: Ord, T> PartialOrd for Keyed<K, T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<K: Ord, T> Ord for Keyed<K, T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.cmp(&o.0)
    }
}

/// The holding-back rule, the same in every pass: rows are counted in
/// chunks of `chunk`; a row whose key is below the last one sent out (by
/// an earlier chunk) is a straggler; otherwise it goes into the buffer. At
/// each chunk's end the buffer is sorted and all but its last `held` rows
/// go out.
struct Order<K, T> {
    buf: Vec<Keyed<K, T>>,
    /// Rows sent out, in order.
    out: VecDeque<Keyed<K, T>>,
    last_out: Option<K>,
    /// Rows counted in the chunk so far, stragglers included.
    rows: usize,
    held: usize,
    chunk: usize,
}

impl<K: Ord + Copy, T> Order<K, T> {
    fn new(held: usize, chunk: usize) -> Self {
        Self {
            buf: Vec::new(),
            out: VecDeque::new(),
            last_out: None,
            rows: 0,
            held,
            chunk: chunk.max(1),
        }
    }

    /// Takes the next row: Err(item) when it is a straggler.
    fn take(&mut self, key: K, item: T) -> Result<(), T> {
        if self.last_out.is_some_and(|l| key < l) {
            self.count();
            return Err(item);
        }
        self.buf.push(Keyed(key, item));
        self.count();
        Ok(())
    }

    /// Counts a row that was found to be a straggler in an earlier pass.
    fn skip(&mut self) {
        self.count();
    }

    fn count(&mut self) {
        self.rows += 1;
        if self.rows == self.chunk {
            self.rows = 0;
            self.send(self.held);
        }
    }

    /// Sorts the buffer and sends out all but its last `keep` rows. The
    /// buffer is what was held (sorted) and a chunk in about table order:
    /// the stable sort finds such runs and merges them.
    fn send(&mut self, keep: usize) {
        self.buf.sort();
        let n = self.buf.len().saturating_sub(keep);
        if n > 0 {
            self.last_out = Some(self.buf[n - 1].0);
            self.out.extend(self.buf.drain(..n));
        }
    }

    /// The last rows, after the table's end.
    fn finish(&mut self) {
        self.send(0);
    }
}

/// Pass 3: the items in order.
struct Merge<'a, T: Ordered> {
    batches: Batches<'a, T::Item>,
    order: Order<T::Key, T::Item>,
    /// The stragglers' keys not yet passed, in table order.
    straggler_keys: VecDeque<T::Key>,
    /// The stragglers not yet sent, in key order.
    stragglers: VecDeque<Keyed<T::Key, T::Item>>,
    /// Items in order, ready to go.
    ready: VecDeque<T::Item>,
    drained: bool,
    path: std::path::PathBuf,
}

impl<T: Ordered> Merge<'_, T> {
    fn next(&mut self) -> Option<Result<T::Item, ReportError>> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some(Ok(item));
            }
            if self.drained {
                return self.stragglers.pop_front().map(|s| Ok(s.1));
            }
            match self.batches.next() {
                Some(Ok(items)) => {
                    if let Err(e) = self.read(items) {
                        return Some(Err(e));
                    }
                }
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    self.order.finish();
                    self.send();
                    self.drained = true;
                }
            }
        }
    }

    /// Takes one batch's items through the buffer.
    fn read(&mut self, items: Vec<T::Item>) -> Result<(), ReportError> {
        for item in items {
            let key = T::key(&item);
            if self.straggler_keys.front() == Some(&key) {
                // Read in pass 2: counted in its chunk, as in pass 1, but
                // not buffered.
                self.straggler_keys.pop_front();
                self.order.skip();
                continue;
            }
            if self.order.take(key, item).is_err() {
                return Err(ReportError::damaged(
                    &self.path,
                    "the table changed between two reads",
                ));
            }
        }
        self.send();
        Ok(())
    }

    /// Queues what the buffer sent out, each after every straggler that
    /// comes before it.
    fn send(&mut self) {
        while let Some(k) = self.order.out.pop_front() {
            while self.stragglers.front().is_some_and(|s| s.0 < k.0) {
                let s = self.stragglers.pop_front().expect("a front was seen");
                self.ready.push_back(s.1);
            }
            self.ready.push_back(k.1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of starts, read in batches of `batch`.
    struct Starts {
        starts: Vec<i64>,
        batch: usize,
    }

    impl Ordered for Starts {
        type Key = (i64, u64);
        type Item = (i64, u64);

        fn key(item: &(i64, u64)) -> (i64, u64) {
            *item
        }

        fn row(k: &(i64, u64)) -> u64 {
            k.1
        }

        fn keys(&self) -> Result<Batches<'_, (i64, u64)>, ReportError> {
            self.items(None)
        }

        fn items(&self, only: Option<&[u64]>) -> Result<Batches<'_, (i64, u64)>, ReportError> {
            // Batches of the table, each cut to the wanted rows, as a
            // table reader does it.
            let mut rows = Numbering::new(only);
            let batches: Vec<Vec<(i64, u64)>> = self
                .starts
                .chunks(self.batch)
                .map(|b| {
                    let (first, picked) = rows.pick(b.len());
                    picked.map(|i| (b[i], first + i as u64)).collect()
                })
                .collect();
            Ok(Box::new(batches.into_iter().map(Ok)))
        }

        fn path(&self) -> std::path::PathBuf {
            "t".into()
        }
    }

    /// A stable sort by start, whatever the disorder: calls returning in
    /// end order, long ones among short ones, ties, and a table whose whole
    /// first half started after its second.
    #[test]
    fn the_order_is_a_stable_sort_by_start() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut cases: Vec<Vec<i64>> = vec![
            vec![],
            vec![5],
            (0..100).rev().collect(),
            (0..100).map(|i| (i % 7) as i64).collect(),
            (50..100).chain(0..50).collect(),
        ];
        for _ in 0..50 {
            // Calls as they return: mostly short, some long (a start far
            // back).
            let mut end = 0i64;
            let n = 1 + rand(400) as usize;
            cases.push(
                (0..n)
                    .map(|_| {
                        end += rand(10) as i64;
                        let long = rand(20) == 0;
                        end - if long { rand(1000) } else { rand(5) } as i64
                    })
                    .collect(),
            );
        }
        let mut with_stragglers = 0;
        for starts in &cases {
            let mut want: Vec<u64> = (0..starts.len() as u64).collect();
            want.sort_by_key(|&r| starts[r as usize]);
            for (batch, held) in [(1, 1), (3, 2), (7, 4), (16, 64), (1000, 8)] {
                let table = Starts {
                    starts: starts.clone(),
                    batch,
                };
                let got: Vec<u64> = in_order(&table, held)
                    .unwrap()
                    .map(|i| i.unwrap().1)
                    .collect();
                assert_eq!(
                    got, want,
                    "starts {starts:?}, batches of {batch}, {held} held"
                );
                let mut order = Order::<(i64, u64), ()>::new(held, held);
                with_stragglers += starts
                    .iter()
                    .zip(0..)
                    .any(|(&s, r)| order.take((s, r), ()).is_err())
                    as usize;
            }
        }
        // The merge of stragglers was exercised, not only the heap.
        assert!(with_stragglers > 50, "{with_stragglers}");
    }
}
