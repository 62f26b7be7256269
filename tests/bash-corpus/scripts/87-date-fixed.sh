# date with a fixed timestamp
date -u -d @0 +%Y-%m-%d
date -u -d '2026-11-30 12:34:56' '+%H:%M'
