# comm and join on sorted input
sort -u data/words.txt > a.sorted
printf 'apple\nbanana\nkiwi\n' > b.sorted
comm -12 a.sorted b.sorted
comm -13 a.sorted b.sorted
