"""The metrics of the evaluation protocols, as pure functions over parsed inputs (no file reading)."""
