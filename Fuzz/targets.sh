# The fuzz targets and the seed folders of each, for run.sh and ci.sh (sourced; POSIX sh).
# Every folder is inside the repository.
targets="FuzzJSON FuzzWebim FuzzVoximplant FuzzCXone FuzzMatrix FuzzXMPP"

# The seed folders of target $1, relative to Fuzz/, on one line; fails for an unknown target.
seeds_of() {
    case "$1" in
        FuzzJSON) echo "../Tests/Fixtures/webim ../Tests/Fixtures/cxone Seeds/voximplant" ;;
        FuzzWebim) echo "../Tests/Fixtures/webim Seeds/webim" ;;
        FuzzVoximplant) echo "Seeds/voximplant" ;;
        FuzzCXone) echo "../Tests/Fixtures/cxone Seeds/cxone" ;;
        FuzzMatrix) echo "../Tests/Fixtures/matrix" ;;
        FuzzXMPP) echo "Seeds/xmpp" ;;
        *) return 1 ;;
    esac
}
