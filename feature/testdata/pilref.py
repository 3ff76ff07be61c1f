"""Pillow's side of convert's image tests (image_test.go).

gen DIR      writes test images (PNG, JPEG, WebP; RGB, grey, palette, alpha,
             CMYK, EXIF orientations) into DIR and prints their names.
ref          reads JSON jobs from stdin, one per line:
             {"src", "out", "channels", "size": [H, W], "resize", "filter",
             "fill"} and writes to "out" the U8 [H, W, C] bytes Pillow gives
             for SPEC.md §2.8 stated with Pillow's own operations:
             ImageOps.exif_transpose, Image.convert("RGB" or "L"),
             Image.resize(size, filter), crop or paste on a background.
             Without "size" it writes the decoded image and prints its size.

Needs /usr/bin/python3 with Debian's python3-pil and python3-numpy.
"""
import io
import json
import sys

import numpy as np
from PIL import Image, ImageOps

FILTERS = {"bilinear": Image.BILINEAR, "area": Image.BOX, "lanczos": Image.LANCZOS}


def natural(w, h, seed):
    """A smooth image with edges and some noise, like a photograph."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / 7.0 + seed) * np.cos(y / 11.0)
    g = 128 + 90 * np.cos((x + y) / 13.0)
    b = np.where((x // 16 + y // 16) % 2 == 0, 200.0, 40.0)
    a = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def exif_with(orientation):
    e = Image.Exif()
    e[0x0112] = orientation
    return e.tobytes()


def gen(d):
    names = []

    def save(im, name, **kw):
        im.save(f"{d}/{name}", **kw)
        names.append(name)

    rgb = Image.fromarray(natural(61, 37, 1))
    save(rgb, "rgb.png")
    save(rgb.convert("L"), "grey.png")
    save(rgb.convert("P", palette=Image.ADAPTIVE, colors=50), "palette.png")
    rgba = rgb.copy()
    rgba.putalpha(Image.fromarray(natural(61, 37, 2)[:, :, 0]))
    save(rgba, "rgba.png")
    save(rgba.convert("LA"), "greya.png")
    for o in range(1, 9):
        save(rgb, f"orient{o}.png", exif=exif_with(o))
    big = Image.fromarray(natural(256, 256, 4))
    save(big, "big.png")
    save(Image.fromarray(natural(300, 200, 5)), "wide.png")
    save(Image.fromarray(natural(90, 160, 6)), "tall.png")
    save(big, "q90.jpg", quality=90)
    save(big, "q90_444.jpg", quality=90, subsampling=0)
    save(big.convert("L"), "grey.jpg", quality=90)
    save(big.convert("CMYK"), "cmyk.jpg", quality=95)
    save(big, "orient6.jpg", quality=90, exif=exif_with(6))
    save(Image.fromarray(natural(33, 17, 7)), "odd.jpg", quality=90)
    save(Image.fromarray(natural(1, 5, 8)), "thin.jpg", quality=90)
    save(Image.fromarray(natural(33, 17, 7)), "422.jpg", quality=90, subsampling=1)
    save(big, "lossless.webp", lossless=True)
    save(big, "lossy.webp", quality=90)
    print("\n".join(names))


def size_for(w, h, H, W, mode):
    wider = w * H >= h * W
    if mode == "stretch":
        return W, H
    if mode == "fit":
        if wider:
            return W, max(1, (2 * h * W + w) // (2 * w))
        return max(1, (2 * w * H + h) // (2 * h)), H
    if wider:
        return (2 * w * H + h) // (2 * h), H
    return W, (2 * h * W + w) // (2 * w)


def ref(job):
    im = ImageOps.exif_transpose(Image.open(job["src"]))
    mode = "L" if job.get("channels", 3) == 1 else "RGB"
    im = im.convert(mode)
    if "size" not in job:
        open(job["out"], "wb").write(np.asarray(im).tobytes())
        return [im.size[1], im.size[0]]
    H, W = job["size"]
    resize = job.get("resize", "shorter-side")
    rw, rh = size_for(im.size[0], im.size[1], H, W, resize)
    r = im.resize((rw, rh), FILTERS[job.get("filter", "bilinear")])
    if resize == "fit":
        fill = job.get("fill", 0)
        bg = Image.new(mode, (W, H), fill if mode == "L" else (fill,) * 3)
        bg.paste(r, ((W - rw) // 2, (H - rh) // 2))
        r = bg
    elif resize == "shorter-side":
        left, top = (rw - W) // 2, (rh - H) // 2
        r = r.crop((left, top, left + W, top + H))
    open(job["out"], "wb").write(np.asarray(r).tobytes())
    return [H, W]


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(ref(json.loads(line))))
