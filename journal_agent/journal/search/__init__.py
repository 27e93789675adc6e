"""Finding entries: the index and its schema, query analysis, meaning, fusion, duplicates."""
