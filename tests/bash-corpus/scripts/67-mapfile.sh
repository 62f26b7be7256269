# mapfile / readarray
mapfile -t lines < notes.txt
echo "${#lines[@]} ${lines[0]} ${lines[11]}"
