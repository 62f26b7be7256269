# diff exit status and output
# known: diff prints a unified diff by default (GNU: normal format)
printf 'a\nb\nc\n' > x1.txt
printf 'a\nB\nc\n' > x2.txt
diff x1.txt x2.txt; echo "diff exit $?"
diff x1.txt x1.txt && echo same
