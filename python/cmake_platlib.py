"""Prints where `cmake --install` puts the detinfer package for this Python and prefix.

Debian's Python searches /usr/local/lib/python3.X/dist-packages (its "posix_local"
scheme adds "/local" to whatever prefix it is given) and /usr/lib/python3/dist-packages;
other Pythons use their platlib under the prefix.
"""
import sys
import sysconfig

prefix = sys.argv[1]
scheme = sysconfig.get_default_scheme()
if scheme == "posix_local" and prefix == "/usr/local":
    path = sysconfig.get_path("platlib")
elif scheme == "posix_local" and prefix == "/usr":
    path = sysconfig.get_path("platlib", "deb_system")
else:
    vars_ = {"base": prefix, "platbase": prefix}
    name = "posix_prefix" if scheme == "posix_local" else scheme
    path = sysconfig.get_path("platlib", name, vars=vars_)
print(path)
