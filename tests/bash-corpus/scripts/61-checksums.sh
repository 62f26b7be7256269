# checksums and base64 of binary data
sha256sum bin.dat
md5sum data/words.txt
base64 bin.dat
base64 bin.dat | base64 -d | cmp - bin.dat && echo "round trip ok"
