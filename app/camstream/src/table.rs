//! A table of live things (connections, sessions) named by slot and
//! generation. A slot is reused once its entry is gone, the generation
//! never: an [`Id`] kept after its entry went (a tunnel's other half, a
//! session's connection, a readiness event still in the poll's batch) finds
//! nothing, instead of whoever took the slot next.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use slab::Slab;

/// Names one entry of a `Table<T>` for as long as it lives.
pub struct Id<T> {
    slot: u32,
    generation: u32,
    kind: PhantomData<fn() -> T>,
}

// By hand: derives would ask the same of T.
impl<T> Clone for Id<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Id<T> {}
impl<T> PartialEq for Id<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.slot, self.generation) == (other.slot, other.generation)
    }
}
impl<T> Eq for Id<T> {}
impl<T> Hash for Id<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.slot, self.generation).hash(state);
    }
}
impl<T> fmt::Debug for Id<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.slot, self.generation)
    }
}

/// Bits of a poll token that carry the slot; the rest carry the
/// generation (its low bits, on a 32-bit machine: enough, as a token only
/// has to tell the entries of one batch of events apart).
const SLOT_BITS: u32 = 24;

/// The slot part of a poll token spans 0..TOKEN_SLOTS, which tables whose
/// ids become tokens share out in ranges.
pub const TOKEN_SLOTS: usize = 1 << SLOT_BITS;

impl<T> Id<T> {
    /// As a poll token: `base` plus the slot, the generation above it, so
    /// that a readiness event of a closed connection does not reach the
    /// next one in its slot.
    pub fn token(self, base: usize) -> mio::Token {
        let generation = (self.generation as usize) << SLOT_BITS;
        mio::Token(base + self.slot as usize + generation)
    }

    /// The id a token made by [`Id::token`] names, if its slot part lies in
    /// `slots` (a table's token range; below and above it, other tables'
    /// or the caller's fixed tokens).
    pub fn from_token(token: mio::Token, slots: std::ops::Range<usize>) -> Option<Id<T>> {
        let part = token.0 & (TOKEN_SLOTS - 1);
        if !slots.contains(&part) {
            return None;
        }
        let slot = u32::try_from(part - slots.start).ok()?;
        Some(Id {
            slot,
            generation: (token.0 >> SLOT_BITS) as u32,
            kind: PhantomData,
        })
    }

    /// The generation as a token carries it.
    fn in_token(generation: u32) -> u32 {
        let bits = usize::BITS - SLOT_BITS;
        if bits >= 32 {
            generation
        } else {
            generation & ((1 << bits) - 1)
        }
    }
}

pub struct Table<T> {
    entries: Slab<(u32, T)>,
    next_generation: u32,
    /// Most entries at once: slots stay below what a token can carry.
    capacity: usize,
}

impl<T> Table<T> {
    pub fn new() -> Table<T> {
        Table::with_capacity(TOKEN_SLOTS - 64)
    }

    /// A table [`Table::next_id`] keeps below `capacity` entries: the size
    /// of its token range.
    pub fn with_capacity(capacity: usize) -> Table<T> {
        Table {
            entries: Slab::new(),
            next_generation: 0,
            capacity: capacity.min(TOKEN_SLOTS - 64),
        }
    }

    /// The id the next [`Table::insert`] returns, or None if the table is
    /// full.
    pub fn next_id(&self) -> Option<Id<T>> {
        if self.entries.len() >= self.capacity {
            return None;
        }
        Some(Id {
            slot: self.entries.vacant_key() as u32,
            generation: Id::<T>::in_token(self.next_generation),
            kind: PhantomData,
        })
    }

    /// Inserts `value` under the id [`Table::next_id`] gave. A table whose
    /// ids go into tokens (connections) asks `next_id` first, so it never
    /// holds more than its capacity; others (sessions, subscribers, bounded
    /// by the connections) need not.
    pub fn insert(&mut self, value: T) -> Id<T> {
        let id = Id {
            slot: self.entries.vacant_key() as u32,
            generation: Id::<T>::in_token(self.next_generation),
            kind: PhantomData,
        };
        self.entries.insert((id.generation, value));
        self.next_generation = self.next_generation.wrapping_add(1);
        id
    }

    pub fn get(&self, id: Id<T>) -> Option<&T> {
        match self.entries.get(id.slot as usize) {
            Some((generation, value)) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, id: Id<T>) -> Option<&mut T> {
        match self.entries.get_mut(id.slot as usize) {
            Some((generation, value)) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub fn remove(&mut self, id: Id<T>) -> Option<T> {
        self.get(id)?;
        Some(self.entries.remove(id.slot as usize).1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Id<T>, &T)> {
        self.entries.iter().map(|(slot, (generation, value))| {
            (
                Id {
                    slot: slot as u32,
                    generation: *generation,
                    kind: PhantomData,
                },
                value,
            )
        })
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Id<T>, &mut T)> {
        self.entries.iter_mut().map(|(slot, (generation, value))| {
            (
                Id {
                    slot: slot as u32,
                    generation: *generation,
                    kind: PhantomData,
                },
                value,
            )
        })
    }

    pub fn ids(&self) -> Vec<Id<T>> {
        self.iter().map(|(id, _)| id).collect()
    }
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table::new()
    }
}

/// What one part keeps of another's entries (a protocol's state of each
/// of its connections), by the same ids: found only while the id's entry
/// is the one it was stored for.
pub struct Secondary<T, V> {
    slots: Vec<Option<(u32, V)>>,
    len: usize,
    kind: PhantomData<fn() -> T>,
}

impl<T, V> Secondary<T, V> {
    pub fn new() -> Secondary<T, V> {
        Secondary {
            slots: Vec::new(),
            len: 0,
            kind: PhantomData,
        }
    }

    /// Stores `value` for `id`, replacing what a former entry of its slot
    /// left (returned).
    pub fn insert(&mut self, id: Id<T>, value: V) -> Option<V> {
        let slot = id.slot as usize;
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, || None);
        }
        let old = self
            .slots
            .get_mut(slot)
            .and_then(|e| e.replace((id.generation, value)));
        if old.is_none() {
            self.len += 1;
        }
        old.map(|(_, v)| v)
    }

    pub fn get(&self, id: Id<T>) -> Option<&V> {
        match self.slots.get(id.slot as usize)? {
            Some((generation, value)) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, id: Id<T>) -> Option<&mut V> {
        match self.slots.get_mut(id.slot as usize)? {
            Some((generation, value)) if *generation == id.generation => Some(value),
            _ => None,
        }
    }

    pub fn remove(&mut self, id: Id<T>) -> Option<V> {
        self.get(id)?;
        self.len -= 1;
        self.slots.get_mut(id.slot as usize)?.take().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = (Id<T>, &V)> {
        self.slots.iter().enumerate().filter_map(|(slot, e)| {
            let (generation, value) = e.as_ref()?;
            Some((
                Id {
                    slot: slot as u32,
                    generation: *generation,
                    kind: PhantomData,
                },
                value,
            ))
        })
    }
}

impl<T, V> Default for Secondary<T, V> {
    fn default() -> Self {
        Secondary::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_id_finds_nothing_in_a_reused_slot() {
        let mut t = Table::new();
        let a = t.insert("a");
        assert_eq!(t.remove(a), Some("a"));
        let b = t.insert("b");
        assert_eq!((a.slot, b.slot), (0, 0), "the slot is reused");
        assert_eq!(t.get(a), None);
        assert_eq!(t.remove(a), None);
        assert_eq!(t.get(b), Some(&"b"));
        assert!(t.get(b).is_some() && t.get(a).is_none());
    }

    #[test]
    fn tokens_round_trip_and_tell_generations_apart() {
        let mut t = Table::new();
        let a = t.insert(1);
        t.remove(a);
        let b = t.insert(2);
        let (ta, tb) = (a.token(16), b.token(16));
        assert_ne!(ta, tb);
        assert_eq!(Id::<i32>::from_token(tb, 16..1024), Some(b));
        assert_eq!(t.get(Id::from_token(ta, 16..1024).unwrap()), None);
        assert_eq!(Id::<i32>::from_token(mio::Token(3), 16..1024), None);
        // Another table's range.
        assert_eq!(Id::<i32>::from_token(tb, 1024..2048), None);
        assert_eq!(Id::<i32>::from_token(b.token(1024), 1024..2048), Some(b));
        assert_eq!(Id::<i32>::from_token(b.token(1024), 16..1024), None);
    }

    #[test]
    fn a_secondary_finds_only_the_entry_it_was_given_for() {
        let mut t = Table::new();
        let mut side = Secondary::new();
        let a = t.insert(());
        side.insert(a, "a's");
        t.remove(a);
        let b = t.insert(());
        assert_eq!(side.get(b), None, "b took a's slot, not its state");
        assert_eq!(side.insert(b, "b's"), Some("a's"));
        assert_eq!(side.get(a), None);
        assert_eq!(side.len(), 1);
        assert_eq!(side.remove(b), Some("b's"));
        assert_eq!((side.len(), side.iter().count()), (0, 0));
    }

    #[test]
    fn next_id_is_what_insert_returns() {
        let mut t = Table::new();
        for k in 0..5 {
            let want = t.next_id().unwrap();
            assert_eq!(t.insert(k), want);
        }
        let ids = t.ids();
        t.remove(ids[2]);
        let want = t.next_id().unwrap();
        assert_eq!(t.insert(9), want);
        assert_eq!(want.slot, 2);
    }
}
