"""The real queue libraries, driven into a known mix of jobs for the preset tests."""
