//! Huffman tables (DHT): which of T.81 Annex K's standard tables each slot
//! holds, the only ones RFC 2435 receivers use.

use super::JpegError;
use crate::tables::{CHROMA_AC, CHROMA_DC, HuffmanTable, LUMA_AC, LUMA_DC};

/// Which standard table a DHT slot holds, if any.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Not defined by the frame: decoders of Motion-JPEG (AVI1, UVC) fill
    /// slot 0 with the luma and slot 1 with the chroma tables of Annex K.
    Undefined,
    Luma,
    Chroma,
    Other,
}

fn classify(table: &[u8], class: u8) -> Slot {
    let (luma, chroma) = if class == 0 {
        (LUMA_DC, CHROMA_DC)
    } else {
        (LUMA_AC, CHROMA_AC)
    };
    let is = |t: &HuffmanTable| table[..16] == t.counts && table[16..] == *t.symbols;
    if is(&luma) {
        Slot::Luma
    } else if is(&chroma) {
        Slot::Chroma
    } else {
        Slot::Other
    }
}

pub(super) fn effective(slot: Slot, id: u8) -> Slot {
    match (slot, id) {
        (Slot::Undefined, 0) => Slot::Luma,
        (Slot::Undefined, 1) => Slot::Chroma,
        (Slot::Undefined, _) => Slot::Other,
        (s, _) => s,
    }
}

pub(super) fn parse_dht(mut body: &[u8], huff: &mut [[Slot; 4]; 2]) -> Result<(), JpegError> {
    while !body.is_empty() {
        if body.len() < 17 {
            return Err(JpegError::Malformed);
        }
        let (class, id) = (body[0] >> 4, body[0] & 0x0f);
        if class > 1 || id > 3 {
            return Err(JpegError::Malformed);
        }
        let n: usize = body[1..17].iter().map(|&c| usize::from(c)).sum();
        if n > 256 || body.len() < 17 + n {
            return Err(JpegError::Malformed);
        }
        huff[usize::from(class)][usize::from(id)] = classify(&body[1..17 + n], class);
        body = &body[17 + n..];
    }
    Ok(())
}
