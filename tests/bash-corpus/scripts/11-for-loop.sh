# for over a list and a brace range
for f in alpha beta gamma; do echo "item $f"; done
for i in {1..5}; do printf '%d ' "$i"; done; echo
