# wc over several files with a total
wc -l data/words.txt data/numbers.txt notes.txt
