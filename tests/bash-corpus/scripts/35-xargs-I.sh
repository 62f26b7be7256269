# xargs -I and -n
# known: xargs rejects the attached form -I{} (-I {} works)
printf 'a\nb\nc\n' | xargs -I{} echo "<{}>"
echo 1 2 3 4 5 | xargs -n 2 echo
