# until loop with break and continue
# known: a loop left by break keeps the status of the command before break (bash: 0)
i=0
until [ $i -ge 10 ]; do
  i=$((i + 1))
  [ $((i % 2)) -eq 0 ] && continue
  [ $i -gt 7 ] && break
  echo "odd $i"
done
