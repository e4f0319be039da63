"""The local stack: the embedded emulator (`emulator`) with its patches of moto
(`moto_patches`), the local CDN (`local_cdn`), and a Lambda runtime stand-in (`lambda_bridge`)."""
