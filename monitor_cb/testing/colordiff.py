"""How different two colours look: sRGB -> CIELAB (D65) and the CIEDE2000 colour difference.

CIEDE2000 follows Sharma, Wu and Dalal, "The CIEDE2000 Color-Difference Formula: Implementation
Notes, Supplementary Test Data, and Mathematical Observations" (Color Res. Appl. 30, 2005), whose 34
test pairs the tests check. A difference of about 1 is just noticeable side by side; run colours
are kept at least :data:`DISTINCT` apart so that two lines in a legend are not confused.
"""

from __future__ import annotations

import math

Lab = tuple[float, float, float]

DISTINCT = 10.0  # the CIEDE2000 distance under which two run colours count as confusable
# sRGB (IEC 61966-2-1) primaries to XYZ, and the D65 white point, as in CSS Color 4
_RGB_TO_XYZ = (
    (0.41239079926595934, 0.357584339383878, 0.1804807884018343),
    (0.21263900587151027, 0.715168678767756, 0.07219231536073371),
    (0.01933081871559182, 0.11919477979462598, 0.9505321522496607),
)
_WHITE = (0.9504559270516716, 1.0, 1.0890577507598784)
_POW25_7 = 25.0**7


def hex_to_rgb(color: str) -> tuple[float, float, float]:
    """``"#1f77b4"`` (or ``"1f77b4"``, ``"#17b"``) as sRGB components in [0, 1].

    Raises:
        ValueError: not a 3- or 6-digit hex colour.
    """
    text = color.strip().lstrip("#")
    if len(text) == 3:
        text = "".join(c * 2 for c in text)
    if len(text) != 6:
        raise ValueError(f"not a hex colour: {color!r} (expected #rrggbb)")
    try:
        return tuple(int(text[i : i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]
    except ValueError:
        raise ValueError(f"not a hex colour: {color!r} (expected #rrggbb)") from None


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _f(t: float) -> float:
    return t ** (1.0 / 3.0) if t > (6.0 / 29.0) ** 3 else t / (3.0 * (6.0 / 29.0) ** 2) + 4.0 / 29.0


def hex_to_lab(color: str) -> Lab:
    """A hex sRGB colour in CIELAB (D65 white)."""
    rgb = [_linear(c) for c in hex_to_rgb(color)]
    x, y, z = (sum(m * c for m, c in zip(row, rgb, strict=True)) for row in _RGB_TO_XYZ)
    fx, fy, fz = _f(x / _WHITE[0]), _f(y / _WHITE[1]), _f(z / _WHITE[2])
    return 116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)


def ciede2000(lab1: Lab, lab2: Lab, k_l: float = 1.0, k_c: float = 1.0, k_h: float = 1.0) -> float:
    """The CIEDE2000 difference of two CIELAB colours (Sharma et al. 2005, equations 1-17)."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2.0
    g = 0.5 * (1.0 - math.sqrt(c_bar**7 / (c_bar**7 + _POW25_7)))
    a1p, a2p = (1.0 + g) * a1, (1.0 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = _hue(b1, a1p)
    h2p = _hue(b2, a2p)

    dl = l2 - l1
    dc = c2p - c1p
    if c1p * c2p == 0.0:
        dh = 0.0
    else:
        dh = h2p - h1p
        if dh > 180.0:
            dh -= 360.0
        elif dh < -180.0:
            dh += 360.0
    dh_big = 2.0 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh) / 2.0)

    l_bar = (l1 + l2) / 2.0
    cp_bar = (c1p + c2p) / 2.0
    if c1p * c2p == 0.0:
        hp_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180.0:
        hp_bar = (h1p + h2p) / 2.0
    elif h1p + h2p < 360.0:
        hp_bar = (h1p + h2p + 360.0) / 2.0
    else:
        hp_bar = (h1p + h2p - 360.0) / 2.0

    t = (
        1.0
        - 0.17 * math.cos(math.radians(hp_bar - 30.0))
        + 0.24 * math.cos(math.radians(2.0 * hp_bar))
        + 0.32 * math.cos(math.radians(3.0 * hp_bar + 6.0))
        - 0.20 * math.cos(math.radians(4.0 * hp_bar - 63.0))
    )
    d_theta = 30.0 * math.exp(-(((hp_bar - 275.0) / 25.0) ** 2))
    r_c = 2.0 * math.sqrt(cp_bar**7 / (cp_bar**7 + _POW25_7))
    s_l = 1.0 + 0.015 * (l_bar - 50.0) ** 2 / math.sqrt(20.0 + (l_bar - 50.0) ** 2)
    s_c = 1.0 + 0.045 * cp_bar
    s_h = 1.0 + 0.015 * cp_bar * t
    r_t = -math.sin(math.radians(2.0 * d_theta)) * r_c
    terms = (dl / (k_l * s_l), dc / (k_c * s_c), dh_big / (k_h * s_h))
    return math.sqrt(terms[0] ** 2 + terms[1] ** 2 + terms[2] ** 2 + r_t * terms[1] * terms[2])


def _hue(b: float, a: float) -> float:
    """Hue angle in degrees in [0, 360); 0 for a neutral colour."""
    if a == 0.0 and b == 0.0:
        return 0.0
    return math.degrees(math.atan2(b, a)) % 360.0


def delta_e(color1: str, color2: str) -> float:
    """CIEDE2000 between two hex sRGB colours."""
    return ciede2000(hex_to_lab(color1), hex_to_lab(color2))


def min_pairwise(colors: list[str] | tuple[str, ...]) -> float:
    """The smallest CIEDE2000 between any two of ``colors`` (inf for fewer than two)."""
    labs = [hex_to_lab(c) for c in colors]
    return min(
        (ciede2000(labs[i], labs[j]) for i in range(len(labs)) for j in range(i + 1, len(labs))),
        default=math.inf,
    )
