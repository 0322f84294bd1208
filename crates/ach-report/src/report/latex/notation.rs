//! Plain report text as LaTeX: the paper's symbols for the names the report spells in ASCII
//! (`D-bar` is $\bar D$, `pi_chg` is $\pi_{\mathrm{chg}}$, `eps_on` is
//! $\varepsilon_{\mathrm{on}}$), true minus signs, en dashes in ranges, `\dots`, and LaTeX's
//! special characters escaped.

/// The ASCII names of the report and their symbols, longest first where one starts another.
const SYMBOLS: [(&str, &str); 21] = [
    ("D-bar (true)", "$\\bar D_{\\mathrm{true}}$"),
    ("D-bar true", "$\\bar D_{\\mathrm{true}}$"),
    ("D-bar", "$\\bar D$"),
    ("D_max", "$D_{\\max}$"),
    ("M_cum", "$M_{\\mathrm{cum}}$"),
    ("M_keys", "$M_{\\mathrm{keys}}$"),
    ("M_max", "$M_{\\max}$"),
    ("M_H", "$M_H$"),
    ("pi_chg", "$\\pi_{\\mathrm{chg}}$"),
    ("n_viol", "$n_{\\mathrm{viol}}$"),
    ("eps_on", "$\\varepsilon_{\\mathrm{on}}$"),
    ("eps_off", "$\\varepsilon_{\\mathrm{off}}$"),
    ("kappa", "$\\kappa$"),
    ("gamma", "$\\gamma$"),
    ("sigma", "$\\sigma$"),
    ("tau", "$\\tau$"),
    ("CI95", "CI$_{95}$"),
    ("Cliff's delta", "Cliff's $\\delta$"),
    ("p (raw)", "$p$"),
    ("Wilcoxon p", "Wilcoxon $p$"),
    ("p (Holm)", "$p_{\\mathrm{Holm}}$"),
];

/// Whether `c` continues a word (a symbol only matches as a whole word).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` as LaTeX: symbols for the report's names, LaTeX's special characters escaped, a minus
/// before a digit as a math minus, a hyphen between digits as an en dash, `...` as `\dots`.
pub fn latex_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    'scan: while i < chars.len() {
        let before = i.checked_sub(1).map(|j| chars[j]);
        if before.is_none_or(|c| !is_word(c)) {
            for (name, symbol) in SYMBOLS {
                let name: Vec<char> = name.chars().collect();
                let end = i + name.len();
                if chars.get(i..end) == Some(&name[..])
                    && chars.get(end).is_none_or(|&c| !is_word(c))
                {
                    out.push_str(symbol);
                    i = end;
                    continue 'scan;
                }
            }
        }
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '.' if chars.get(i..i + 3) == Some(&['.', '.', '.']) => {
                out.push_str("\\dots{}");
                i += 3;
                continue;
            }
            // A range of series: `C1-C4c`.
            '-' if before.is_some_and(|b| b.is_ascii_digit())
                && next.is_some_and(|n| n.is_ascii_uppercase())
                && chars.get(i + 2).is_some_and(|n| n.is_ascii_digit()) =>
            {
                out.push_str("--");
            }
            '-' if next.is_some_and(|n| n.is_ascii_digit()) => {
                if before.is_some_and(|b| b.is_ascii_digit()) {
                    out.push_str("--");
                } else {
                    out.push_str("$-$");
                }
            }
            '\\' => out.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '<' => out.push_str("$<$"),
            '>' => out.push_str("$>$"),
            '≤' => out.push_str("$\\le$"),
            '±' => out.push_str("$\\pm$"),
            '—' => out.push_str("---"),
            '–' => out.push_str("--"),
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_symbols_as_whole_words_only() {
        assert_eq!(latex_text("D-bar"), "$\\bar D$");
        assert_eq!(latex_text("D-bar (true)"), "$\\bar D_{\\mathrm{true}}$");
        assert_eq!(
            latex_text("kappa 0.05-0.2: no effect"),
            "$\\kappa$ 0.05--0.2: no effect"
        );
        assert_eq!(
            latex_text("eps_on=0.05"),
            "$\\varepsilon_{\\mathrm{on}}$=0.05"
        );
        // Inside a longer word a name is text.
        assert_eq!(latex_text("taus"), "taus");
        assert_eq!(latex_text("Cliff's delta"), "Cliff's $\\delta$");
    }

    #[test]
    fn minus_signs_ranges_dots_and_special_characters() {
        assert_eq!(latex_text("-21.5"), "$-$21.5");
        assert_eq!(latex_text("C1-C4c"), "C1--C4c");
        assert_eq!(latex_text("Static-W"), "Static-W");
        assert_eq!(
            latex_text("42, 1042, ..., 29042"),
            "42, 1042, \\dots{}, 29042"
        );
        assert_eq!(latex_text("10 % & more_x"), "10 \\% \\& more\\_x");
        assert_eq!(latex_text("< 0.001"), "$<$ 0.001");
        assert_eq!(latex_text("mean ± CI95"), "mean $\\pm$ CI$_{95}$");
    }
}
