//! Line-based three-way merge (diff3) of a file of yours: the last export's
//! version (base), yours (on disk) and the new export's (new).
//!
//! Written here rather than taken from a crate: every dependency of the
//! exporter is compiled by everyone who builds tollgate, and the whole
//! algorithm is a longest-common-subsequence diff plus one walk. It follows GNU diff3 and git
//! (`merge.conflictStyle=diff3`): both sides are diffed against the base,
//! runs of base lines that neither side touched are kept, and every region
//! between them is taken from whichever side changed it. When both sides
//! changed one region differently it is a conflict, left in the file between
//! git-style markers. As in git, edits on adjacent lines (no unchanged line
//! between them) are one region, so they conflict.
//!
//! Lines are compared byte for byte, terminator included, so a last line
//! without a newline differs from the same line with one. A file of yours
//! that uses CRLF throughout is merged as LF and written back as CRLF: the
//! export generates LF, and a checkout with `core.autocrlf` should not turn
//! every line into a conflict.

/// The label on the first marker: your side of a conflict.
pub const YOURS_MARKER: &str = "<<<<<<< yours";
/// The base: what the last export generated.
pub const BASE_MARKER: &str = "||||||| last export";
pub const SEPARATOR_MARKER: &str = "=======";
/// The new export's side.
pub const NEW_MARKER: &str = ">>>>>>> tollgate export";

/// The result of a merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub bytes: Vec<u8>,
    /// The 1-based line of each conflict's first marker in `bytes`; empty
    /// for a clean merge.
    pub conflicts: Vec<usize>,
}

/// Merge `yours` and `new`, both derived from `base`.
pub fn merge3(base: &[u8], yours: &[u8], new: &[u8]) -> Merged {
    let crlf = is_crlf(yours);
    let (base, yours, new) = if crlf {
        (to_lf(base), to_lf(yours), to_lf(new))
    } else {
        (base.to_vec(), yours.to_vec(), new.to_vec())
    };
    let mut merged = merge_lines(&lines(&base), &lines(&yours), &lines(&new));
    if crlf {
        merged.bytes = to_crlf(&merged.bytes);
    }
    merged
}

/// Every line of `text`, each with its `\n` (the last may have none).
fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

/// Whether every line break of `text` is CRLF (and there is at least one).
fn is_crlf(text: &[u8]) -> bool {
    let mut breaks = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' {
            if i == 0 || text[i - 1] != b'\r' {
                return false;
            }
            breaks += 1;
        }
    }
    breaks > 0
}

fn to_lf(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for (i, &b) in text.iter().enumerate() {
        if b == b'\r' && text.get(i + 1) == Some(&b'\n') {
            continue;
        }
        out.push(b);
    }
    out
}

fn to_crlf(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + text.len() / 32);
    for &b in text {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

fn merge_lines(base: &[&[u8]], yours: &[&[u8]], new: &[&[u8]]) -> Merged {
    // For each base line, the line of each side it is kept as (if any).
    let in_yours = matching(base, yours);
    let in_new = matching(base, new);
    let mut out = Output::default();

    let (mut o, mut a, mut b) = (0, 0, 0);
    loop {
        // A stable run: base lines both sides kept, in step.
        let mut run = 0;
        while o + run < base.len()
            && in_yours[o + run] == Some(a + run)
            && in_new[o + run] == Some(b + run)
        {
            run += 1;
        }
        if run > 0 {
            out.lines(&base[o..o + run]);
            o += run;
            a += run;
            b += run;
            continue;
        }
        if o == base.len() && a == yours.len() && b == new.len() {
            break;
        }
        // An unstable region: up to the next base line both sides kept.
        let next = (o..base.len()).find_map(|i| Some((i, in_yours[i]?, in_new[i]?)));
        let (o_end, a_end, b_end) = next.unwrap_or((base.len(), yours.len(), new.len()));
        let (base_part, yours_part, new_part) = (&base[o..o_end], &yours[a..a_end], &new[b..b_end]);
        if yours_part == base_part || yours_part == new_part {
            out.lines(new_part);
        } else if new_part == base_part {
            out.lines(yours_part);
        } else {
            out.conflict(yours_part, base_part, new_part);
        }
        (o, a, b) = (o_end, a_end, b_end);
    }
    Merged {
        bytes: out.bytes,
        conflicts: out.conflicts,
    }
}

/// The merged text as it is built, counting lines for the conflict list.
#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    line: usize,
    conflicts: Vec<usize>,
}

impl Output {
    fn lines(&mut self, lines: &[&[u8]]) {
        for line in lines {
            self.bytes.extend_from_slice(line);
            self.line += 1;
        }
    }

    fn marker(&mut self, marker: &str) {
        self.bytes.extend_from_slice(marker.as_bytes());
        self.bytes.push(b'\n');
        self.line += 1;
    }

    /// One side's lines between markers; a last line without a newline gets
    /// one, or the next marker would not start a line.
    fn side(&mut self, lines: &[&[u8]]) {
        self.lines(lines);
        if !self.bytes.is_empty() && !self.bytes.ends_with(b"\n") {
            self.bytes.push(b'\n');
        }
    }

    fn conflict(&mut self, yours: &[&[u8]], base: &[&[u8]], new: &[&[u8]]) {
        self.conflicts.push(self.line + 1);
        self.marker(YOURS_MARKER);
        self.side(yours);
        self.marker(BASE_MARKER);
        self.side(base);
        self.marker(SEPARATOR_MARKER);
        self.side(new);
        self.marker(NEW_MARKER);
    }
}

/// The 1-based lines of `text` that are conflict markers: a line that is
/// `=======`, or starts with `<<<<<<<`, `|||||||` or `>>>>>>>` followed by a
/// space or the end of the line (git's own test, `git diff --check`).
pub fn conflict_marker_lines(text: &[u8]) -> Vec<usize> {
    lines(text)
        .iter()
        .enumerate()
        .filter(|(_, line)| is_marker(line))
        .map(|(i, _)| i + 1)
        .collect()
}

fn is_marker(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line == b"=======" {
        return true;
    }
    [b"<<<<<<<", b"|||||||", b">>>>>>>"].iter().any(|marker| {
        line.strip_prefix(&marker[..])
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b" "))
    })
}

/// For each line of `base`, the index of the line of `other` it matches in a
/// longest common subsequence (None where `other` removed or changed it).
/// Increasing, so the matched lines are in the same order on both sides.
fn matching(base: &[&[u8]], other: &[&[u8]]) -> Vec<Option<usize>> {
    let mut matched = vec![None; base.len()];
    // The common prefix and suffix need no search, and are most of a file
    // that was edited in one place.
    let prefix = base.iter().zip(other).take_while(|(x, y)| x == y).count();
    for (i, slot) in matched.iter_mut().enumerate().take(prefix) {
        *slot = Some(i);
    }
    let suffix = base[prefix..]
        .iter()
        .rev()
        .zip(other[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    for k in 0..suffix {
        matched[base.len() - 1 - k] = Some(other.len() - 1 - k);
    }
    let middle_base = &base[prefix..base.len() - suffix];
    let middle_other = &other[prefix..other.len() - suffix];
    for (i, j) in lcs(middle_base, middle_other) {
        matched[prefix + i] = Some(prefix + j);
    }
    matched
}

/// The matched pairs (index in `x`, index in `y`) of a longest common
/// subsequence, by dynamic programming over the (already trimmed) middles.
/// O(N*M) time and space: one side is always a generated file (tens to
/// hundreds of lines), so even a file of yours of thousands of lines stays
/// within a few megabytes.
fn lcs<T: PartialEq>(x: &[T], y: &[T]) -> Vec<(usize, usize)> {
    let (n, m) = (x.len(), y.len());
    if n == 0 || m == 0 {
        return Vec::new();
    }
    // suffix[i * (m + 1) + j]: the LCS length of x[i..] and y[j..].
    let width = m + 1;
    let mut suffix = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            suffix[i * width + j] = if x[i] == y[j] {
                suffix[(i + 1) * width + j + 1] + 1
            } else {
                suffix[(i + 1) * width + j].max(suffix[i * width + j + 1])
            };
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if x[i] == y[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if suffix[(i + 1) * width + j] >= suffix[i * width + j + 1] {
            // Prefer dropping a base line first, so a changed line reads as
            // removed then added, as in every diff tool.
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merge(base: &str, yours: &str, new: &str) -> (String, Vec<usize>) {
        let merged = merge3(base.as_bytes(), yours.as_bytes(), new.as_bytes());
        (String::from_utf8(merged.bytes).unwrap(), merged.conflicts)
    }

    fn clean(base: &str, yours: &str, new: &str) -> String {
        let (text, conflicts) = merge(base, yours, new);
        assert_eq!(
            conflicts,
            Vec::<usize>::new(),
            "expected a clean merge:\n{text}"
        );
        text
    }

    fn conflict(yours: &str, base: &str, new: &str) -> String {
        format!(
            "{YOURS_MARKER}\n{yours}{BASE_MARKER}\n{base}{SEPARATOR_MARKER}\n{new}{NEW_MARKER}\n"
        )
    }

    #[test]
    fn unchanged_sides_give_the_other_side() {
        let base = "a\nb\nc\n";
        assert_eq!(clean(base, base, base), base);
        assert_eq!(clean(base, "a\nB\nc\n", base), "a\nB\nc\n");
        assert_eq!(clean(base, base, "a\nb\nC\n"), "a\nb\nC\n");
    }

    #[test]
    fn edits_separated_by_an_unchanged_line_both_apply() {
        let base = "1\n2\n3\n4\n5\n";
        assert_eq!(
            clean(base, "one\n2\n3\n4\n5\n", "1\n2\n3\n4\nfive\n"),
            "one\n2\n3\n4\nfive\n"
        );
        assert_eq!(
            clean(base, "1\ntwo\n3\n4\n5\n", "1\n2\n3\nfour\n5\n"),
            "1\ntwo\n3\nfour\n5\n"
        );
        // Insertions and removals on different sides.
        assert_eq!(
            clean(base, "1\n2\nyours\n3\n4\n5\n", "1\n2\n3\n5\nnew\n"),
            "1\n2\nyours\n3\n5\nnew\n"
        );
        // An insertion next to a line the other side removed touches it.
        let (_, conflicts) = merge(base, "1\n2\nyours\n3\n4\n5\n", "1\n3\n4\n5\n");
        assert_eq!(conflicts, vec![2]);
    }

    #[test]
    fn both_sides_making_the_same_change_is_clean() {
        let base = "a\nb\nc\n";
        assert_eq!(clean(base, "a\nX\nc\n", "a\nX\nc\n"), "a\nX\nc\n");
        assert_eq!(clean(base, "a\nc\n", "a\nc\n"), "a\nc\n");
        assert_eq!(clean(base, "a\nb\nc\nd\n", "a\nb\nc\nd\n"), "a\nb\nc\nd\n");
        // The same change in one place, and another change elsewhere.
        assert_eq!(
            clean("1\n2\n3\n4\n5\n", "1\nX\n3\n4\nmine\n", "1\nX\n3\n4\n5\n"),
            "1\nX\n3\n4\nmine\n"
        );
    }

    #[test]
    fn overlapping_edits_conflict_with_all_three_versions() {
        let (text, conflicts) = merge("a\nb\nc\n", "a\nyours\nc\n", "a\nnew\nc\n");
        assert_eq!(
            text,
            format!("a\n{}c\n", conflict("yours\n", "b\n", "new\n"))
        );
        assert_eq!(conflicts, vec![2]);
        assert_eq!(conflict_marker_lines(text.as_bytes()), vec![2, 4, 6, 8]);
    }

    #[test]
    fn adjacent_edits_conflict_as_in_git() {
        let (text, conflicts) = merge("1\n2\n3\n4\n", "1\nTWO\n3\n4\n", "1\n2\nTHREE\n4\n");
        assert_eq!(
            text,
            format!("1\n{}4\n", conflict("TWO\n3\n", "2\n3\n", "2\nTHREE\n"))
        );
        assert_eq!(conflicts, vec![2]);
        // Insertions at the same place, with different text.
        let (text, conflicts) = merge("a\nb\n", "a\nmine\nb\n", "a\ntheirs\nb\n");
        assert_eq!(
            text,
            format!("a\n{}b\n", conflict("mine\n", "", "theirs\n"))
        );
        assert_eq!(conflicts, vec![2]);
    }

    #[test]
    fn conflicts_at_the_start_and_the_end() {
        let (text, conflicts) = merge("a\nb\nc\n", "A\nb\nC\n", "1\nb\n3\n");
        assert_eq!(
            text,
            format!(
                "{}b\n{}",
                conflict("A\n", "a\n", "1\n"),
                conflict("C\n", "c\n", "3\n")
            )
        );
        assert_eq!(conflicts, vec![1, 9]);
        // Both appended something different.
        let (text, conflicts) = merge("a\n", "a\nmine\n", "a\ntheirs\n");
        assert_eq!(text, format!("a\n{}", conflict("mine\n", "", "theirs\n")));
        assert_eq!(conflicts, vec![2]);
    }

    #[test]
    fn a_removal_against_an_edit_conflicts() {
        let (text, conflicts) = merge("a\nb\nc\n", "a\nc\n", "a\nB\nc\n");
        assert_eq!(text, format!("a\n{}c\n", conflict("", "b\n", "B\n")));
        assert_eq!(conflicts, vec![2]);
    }

    #[test]
    fn empty_files() {
        assert_eq!(clean("", "", ""), "");
        assert_eq!(clean("", "", "new\n"), "new\n");
        assert_eq!(clean("", "mine\n", ""), "mine\n");
        assert_eq!(clean("a\n", "", "a\n"), "", "you emptied it");
        assert_eq!(clean("a\n", "a\n", ""), "", "no longer generated content");
        let (text, conflicts) = merge("", "mine\n", "new\n");
        assert_eq!(text, conflict("mine\n", "", "new\n"));
        assert_eq!(conflicts, vec![1]);
        let (text, _) = merge("a\n", "", "b\n");
        assert_eq!(text, conflict("", "a\n", "b\n"));
    }

    #[test]
    fn a_last_line_without_a_newline() {
        assert_eq!(clean("a\nb\nc", "A\nb\nc", "a\nb\nc"), "A\nb\nc");
        assert_eq!(clean("a\nb\nc", "A\nb\nc", "a\nb\nC"), "A\nb\nC");
        // Adding the missing newline is a change to the last line.
        assert_eq!(clean("a\nb\nc", "A\nb\nc", "a\nb\nc\n"), "A\nb\nc\n");
        // In a conflict the markers still start lines of their own.
        let (text, conflicts) = merge("a\nb", "a\nmine", "a\ntheirs");
        assert_eq!(
            text,
            format!("a\n{}", conflict("mine\n", "b\n", "theirs\n"))
        );
        assert_eq!(conflicts, vec![2]);
    }

    #[test]
    fn a_crlf_file_of_yours_merges_line_by_line_and_stays_crlf() {
        let base = "a\nb\nc\nd\n";
        let yours = "a\r\nB\r\nc\r\nd\r\n";
        assert_eq!(clean(base, yours, "a\nb\nc\nD\n"), "a\r\nB\r\nc\r\nD\r\n");
        let (text, conflicts) = merge(base, yours, "a\nX\nc\nd\n");
        assert_eq!(
            text,
            format!("a\n{}c\nd\n", conflict("B\n", "b\n", "X\n")).replace('\n', "\r\n")
        );
        assert_eq!(conflicts, vec![2]);
        assert_eq!(conflict_marker_lines(text.as_bytes()), vec![2, 4, 6, 8]);
        // Mixed line endings are compared as they are: only lines the user
        // left alone match.
        assert_eq!(
            clean(base, "a\r\nb\nc\nd\n", "a\nb\nc\nD\n"),
            "a\r\nb\nc\nD\n"
        );
    }

    #[test]
    fn repeated_lines_are_matched_in_order() {
        let base = "}\n}\n}\n";
        assert_eq!(clean(base, "}\nx\n}\n}\n", base), "}\nx\n}\n}\n");
        let base = "fn a() {\n}\n\nfn b() {\n}\n";
        let yours = "fn a() {\n    mine();\n}\n\nfn b() {\n}\n";
        let new = "fn a() {\n}\n\nfn b() {\n    theirs();\n}\n";
        assert_eq!(
            clean(base, yours, new),
            "fn a() {\n    mine();\n}\n\nfn b() {\n    theirs();\n}\n"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_merge_as_lines_too() {
        let merged = merge3(b"a\n\xff\nc\n", b"A\n\xff\nc\n", b"a\n\xff\nC\n");
        assert_eq!(merged.bytes, b"A\n\xff\nC\n");
        assert!(merged.conflicts.is_empty());
    }

    #[test]
    fn a_large_file_of_yours_against_a_small_base() {
        let base: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let mut yours = String::new();
        for (i, line) in base.lines().enumerate() {
            yours.push_str(line);
            yours.push('\n');
            if i == 10 {
                yours.extend((0..5000).map(|j| format!("mine {j}\n")));
            }
        }
        let new = base.replace("line 40\n", "line forty\n");
        let merged = clean(&base, &yours, &new);
        assert_eq!(merged, yours.replace("line 40\n", "line forty\n"));
    }

    #[test]
    fn markers_are_found_only_as_whole_lines() {
        let text = "<<<<<<< yours\nx\n=======\n>>>>>>> tollgate export\n  =======\n<<<<<<<<\n// <<<<<<< no\n|||||||\n";
        assert_eq!(conflict_marker_lines(text.as_bytes()), vec![1, 3, 4, 8]);
        assert_eq!(conflict_marker_lines(b""), Vec::<usize>::new());
    }

    /// Random edits of a random file: wherever both sides edit disjoint,
    /// separated lines, the merge applies both; a merge with an unchanged
    /// side is always the other side.
    #[test]
    fn random_edits_merge_like_applying_both() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..300 {
            let len = next(12) as usize + 1;
            let base: Vec<String> = (0..len).map(|_| format!("{}\n", next(4))).collect();
            let mut yours = base.clone();
            let mut new = base.clone();
            // Yours may change lines 0, 4, 8...; new the lines two after
            // them: an unchanged line always separates the two sides.
            for i in (0..len).step_by(4) {
                if next(2) == 0 {
                    yours[i] = format!("y{i}\n");
                }
                if i + 2 < len && next(2) == 0 {
                    new[i + 2] = format!("n{i}\n");
                }
            }
            let mut both = base.clone();
            for i in 0..len {
                if yours[i] != base[i] {
                    both[i] = yours[i].clone();
                }
                if new[i] != base[i] {
                    both[i] = new[i].clone();
                }
            }
            let (b, y, n) = (base.concat(), yours.concat(), new.concat());
            assert_eq!(
                clean(&b, &y, &n),
                both.concat(),
                "base {b:?} yours {y:?} new {n:?}"
            );
            assert_eq!(clean(&b, &y, &b), y);
            assert_eq!(clean(&b, &b, &n), n);
        }
    }
}
