"""`kbench selftest`: the anti-cheat fixtures (`fixtures/`) run against the evaluator (`runner`)."""
