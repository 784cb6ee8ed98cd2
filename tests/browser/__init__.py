"""Real-browser tests: headless Chromium driven through the example project."""
