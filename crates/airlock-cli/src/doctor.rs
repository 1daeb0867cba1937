//! `airlock doctor`: each isolation layer, available or not, with the reason and the fix.
use std::process::ExitCode;

use airlock_jail::doctor::{check_all, LayerReport};

pub fn doctor(json: bool) -> ExitCode {
    let layers: Vec<LayerReport> = check_all();
    if json {
        match serde_json::to_string_pretty(&layers) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("airlock: {e}"),
        }
    } else {
        for l in &layers {
            let mark = if l.available { "ok     " } else { "MISSING" };
            println!("{mark} {:<12} {}", l.layer, l.detail);
            if let Some(fix) = l.fix.as_deref().filter(|_| !l.available) {
                println!("        {:<12} fix: {fix}", "");
            }
        }
    }
    ExitCode::SUCCESS
}
