//! Why a frame cannot be sent as RFC 2435 RTP/JPEG, and what could make it
//! sendable.

/// How a frame RTP/JPEG cannot carry as it is can be made carryable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Lossless: re-code the same DCT coefficients as one baseline scan with
    /// the standard Huffman tables.
    Transcode,
    /// Decode and encode again as 4:2:0 (one generation of loss).
    Reencode,
}

/// Why a frame cannot be sent as RFC 2435 RTP/JPEG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JpegError {
    /// No SOI marker at the start.
    NotJpeg,
    /// The data ends before EOI.
    Truncated,
    /// A marker segment is malformed (bad length, bad field, misplaced marker).
    Malformed,
    /// Progressive (SOF2/6/10/14).
    Progressive,
    /// Lossless (SOF3/7/11/15).
    Lossless,
    /// Hierarchical or differential (SOF5, DHP, EXP).
    Hierarchical,
    /// Arithmetic coding (SOF9..15, DAC).
    Arithmetic,
    /// Sample precision other than 8 bits (12-bit JPEG).
    Precision,
    /// One component: grayscale.
    Grayscale,
    /// A component count other than 1 or 3 (CMYK, ...).
    ComponentCount,
    /// 4:4:4: luma not subsampled.
    Subsampling444,
    /// Sampling factors RFC 2435 has no type for (4:1:1, 4:4:0, chroma subsampled unevenly, ...).
    UnsupportedSampling,
    /// The two chroma components use different quantization tables.
    ChromaQuantTables,
    /// A component refers to a quantization table the frame never defines.
    MissingQuantTable,
    /// Huffman tables other than T.81 Annex K (for instance optimized ones).
    NonStandardHuffman,
    /// More than one scan, or a scan that does not interleave all components.
    MultipleScans,
    /// RGB colour (Adobe transform 0 or component ids R, G, B); RFC 2435 implies YCbCr.
    Rgb,
    /// Zero width or height (height in a DNL segment).
    ZeroSize,
    /// Entropy-coded data of 16 MiB or more: does not fit the 24-bit fragment offset.
    TooLarge,
}

impl JpegError {
    /// Every reason, in the order of [`JpegError::index`].
    pub const ALL: [JpegError; 19] = [
        JpegError::NotJpeg,
        JpegError::Truncated,
        JpegError::Malformed,
        JpegError::Progressive,
        JpegError::Lossless,
        JpegError::Hierarchical,
        JpegError::Arithmetic,
        JpegError::Precision,
        JpegError::Grayscale,
        JpegError::ComponentCount,
        JpegError::Subsampling444,
        JpegError::UnsupportedSampling,
        JpegError::ChromaQuantTables,
        JpegError::MissingQuantTable,
        JpegError::NonStandardHuffman,
        JpegError::MultipleScans,
        JpegError::Rgb,
        JpegError::ZeroSize,
        JpegError::TooLarge,
    ];

    /// A dense index for per-reason counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What can make such a frame sendable, keeping the picture; None when
    /// nothing can (the frame is broken or cannot be decoded here).
    pub fn remedy(self) -> Option<Remedy> {
        match self {
            // The coefficients are fine; only their coding is not.
            JpegError::NonStandardHuffman
            | JpegError::Progressive
            | JpegError::MultipleScans
            | JpegError::Arithmetic => Some(Remedy::Transcode),
            // The picture is fine; its colour layout is not.
            JpegError::Grayscale
            | JpegError::Subsampling444
            | JpegError::UnsupportedSampling
            | JpegError::ChromaQuantTables
            | JpegError::Rgb => Some(Remedy::Reencode),
            // Broken, or beyond what an 8-bit decoder reads: never sent.
            JpegError::NotJpeg
            | JpegError::Truncated
            | JpegError::Malformed
            | JpegError::Lossless
            | JpegError::Hierarchical
            | JpegError::Precision
            | JpegError::ComponentCount
            | JpegError::MissingQuantTable
            | JpegError::ZeroSize
            | JpegError::TooLarge => None,
        }
    }

    /// A short, stable name for logs and counters.
    pub fn name(self) -> &'static str {
        match self {
            JpegError::NotJpeg => "not-jpeg",
            JpegError::Truncated => "truncated",
            JpegError::Malformed => "malformed",
            JpegError::Progressive => "progressive",
            JpegError::Lossless => "lossless",
            JpegError::Hierarchical => "hierarchical",
            JpegError::Arithmetic => "arithmetic",
            JpegError::Precision => "12-bit",
            JpegError::Grayscale => "grayscale",
            JpegError::ComponentCount => "component-count",
            JpegError::Subsampling444 => "4:4:4",
            JpegError::UnsupportedSampling => "sampling",
            JpegError::ChromaQuantTables => "chroma-quant-tables",
            JpegError::MissingQuantTable => "missing-quant-table",
            JpegError::NonStandardHuffman => "non-standard-huffman",
            JpegError::MultipleScans => "multiple-scans",
            JpegError::Rgb => "rgb",
            JpegError::ZeroSize => "zero-size",
            JpegError::TooLarge => "too-large",
        }
    }
}

impl core::fmt::Display for JpegError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            JpegError::NotJpeg => "not a JPEG (no SOI marker)",
            JpegError::Truncated => "truncated JPEG (no EOI marker)",
            JpegError::Malformed => "malformed JPEG marker segment",
            JpegError::Progressive => "progressive JPEG",
            JpegError::Lossless => "lossless JPEG",
            JpegError::Hierarchical => "hierarchical JPEG",
            JpegError::Arithmetic => "arithmetic-coded JPEG",
            JpegError::Precision => "JPEG sample precision is not 8 bits",
            JpegError::Grayscale => "grayscale JPEG",
            JpegError::ComponentCount => "JPEG component count is not 3",
            JpegError::Subsampling444 => "4:4:4 JPEG (RTP/JPEG carries only 4:2:2 and 4:2:0)",
            JpegError::UnsupportedSampling => {
                "JPEG sampling factors RTP/JPEG has no type for (it carries luma 2x1 or 2x2 with chroma 1x1)"
            }
            JpegError::ChromaQuantTables => {
                "the two chroma components use different quantization tables"
            }
            JpegError::MissingQuantTable => "a component refers to an undefined quantization table",
            JpegError::NonStandardHuffman => "non-standard (e.g. optimized) Huffman tables",
            JpegError::MultipleScans => "more than one scan, or a non-interleaved scan",
            JpegError::Rgb => "RGB-coded JPEG (RTP/JPEG implies YCbCr)",
            JpegError::ZeroSize => "zero width or height",
            JpegError::TooLarge => "entropy-coded data too large for RTP/JPEG (16 MiB)",
        };
        f.write_str(s)
    }
}

impl core::error::Error for JpegError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_index() {
        for (i, e) in JpegError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }
}
