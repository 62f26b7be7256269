# pipe: grep | wc -l
grep -i error logs/app.log | wc -l
