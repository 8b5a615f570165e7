//! The system prompt. The base layer is compiled in from `prompts/base.md`;
//! template variables are filled per session and turn.

use std::path::Path;

const BASE_PROMPT: &str = include_str!("../prompts/base.md");

pub struct PromptVars<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub cwd: &'a Path,
}

pub fn system_prompt(vars: &PromptVars<'_>) -> String {
    render(BASE_PROMPT, vars, &today())
}

fn render(template: &str, vars: &PromptVars<'_>, date: &str) -> String {
    let cwd = vars.cwd.display().to_string();
    let replacements: [(&str, &str); 6] = [
        ("{{provider}}", vars.provider),
        ("{{model}}", vars.model),
        ("{{cwd}}", &cwd),
        ("{{date}}", date),
        (
            "{{tools}}",
            "none in this version (answer from the conversation)",
        ),
        ("{{mode}}", "default"),
    ];
    let mut out = template.trim().to_string();
    for (key, value) in replacements {
        if out.contains(key) {
            out = out.replace(key, value);
        }
    }
    out
}

/// Today's date (UTC) as YYYY-MM-DD, without a date-time dependency.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0);
    civil_from_days(days as i64)
}

/// Howard Hinnant's days-from-epoch → civil date algorithm.
fn civil_from_days(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_filled() {
        let vars = PromptVars {
            provider: "local",
            model: "smollm2-135m",
            cwd: Path::new("/work/project"),
        };
        let text = render(BASE_PROMPT, &vars, "2026-11-23");
        assert!(text.contains("smollm2-135m"));
        assert!(text.contains("provider local"));
        assert!(text.contains("/work/project"));
        assert!(text.contains("2026-11-23"));
        assert!(!text.contains("{{"), "unfilled variable in: {text}");
    }

    #[test]
    fn dates_are_computed_correctly() {
        assert_eq!(civil_from_days(0), "1970-01-01");
        assert_eq!(civil_from_days(11_016), "2000-02-29");
        assert_eq!(civil_from_days(20_780), "2026-11-23");
    }
}
