# uniq -d and -u
sort data/words.txt | uniq -d
sort data/words.txt | uniq -u
