"""qpidtoollibs"""
