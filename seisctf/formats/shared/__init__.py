"""What the resumable ingests share: listing inputs, their manifest and cache, block writes
and progress."""
