"""What the learner knows over time: the ledger, spaced review (FSRS), /learn's feedback."""
