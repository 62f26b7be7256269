# grep with context lines
grep -A1 'out of memory' logs/app.log
grep -B1 -n 'stopped' logs/app.log
