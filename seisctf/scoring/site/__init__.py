"""The leaderboard's presentation: static HTML pages, sections, SVG and plots."""
