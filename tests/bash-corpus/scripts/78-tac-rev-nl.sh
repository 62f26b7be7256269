# tac, rev, nl
tac data/words.txt | head -3
echo "stressed" | rev
nl -ba docs/guide.md
