"""Reference answers to the tutorials' exercises (for teachers, and for CI, which checks the checks)."""
