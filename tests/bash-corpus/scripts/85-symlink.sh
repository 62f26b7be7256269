# symbolic links
ln -s notes.txt link.txt
readlink link.txt
head -1 link.txt
[ -L link.txt ] && echo "is a link"
